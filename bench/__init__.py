"""Benchmarks: `mirror` side by side with real MirrorMaker 2 and the brokers' own ceiling.

    make bench          # full mode (about 25 minutes on 2 cores)
    make bench-quick    # quick mode (under 5 minutes), for development

`python -m bench --help` lists the options. One run starts two local clusters, seeds fixed workloads
into the source, then measures each contender in turn from an empty target and writes
`bench/results/<timestamp>.{json,md,png}`. Nothing here asserts a timing; it measures and reports.
"""
