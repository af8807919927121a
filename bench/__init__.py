"""Benchmarks: `mirror` side by side with real MirrorMaker 2 and the brokers' own ceiling.

    make bench          # full mode (about 30 minutes on 2 cores)
    make bench-quick    # quick mode (about 12 minutes), for development

`python -m bench --help` lists the options. One run starts two local clusters, seeds fixed workloads
into the source (8-partition topics, and 100 topics x 10 partitions for the many-partitions
workload), then measures each contender in turn from an empty target and writes
`bench/results/<timestamp>.{json,md,png}`. Nothing here asserts a timing; it measures and reports.
"""
