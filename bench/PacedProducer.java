// The steady loads' paced producer, run with Java's single-file launcher on the Kafka jars:
//
//   java -cp '<kafka libs>/*' bench/PacedProducer.java BOOTSTRAP RATE SECONDS PARTITIONS SENT TOPIC...
//
// Why Java: librdkafka sends one ProduceRequest per partition, so a Python producer spreading
// 2,000 records/s over 1,000 partitions makes ~2,000 requests/s and, on this 2-core machine, was
// itself seconds behind (p99 28 s with no replicator at all). Kafka's own producer sends one
// request per broker for all partitions, as the producers of most MM2 users do.
//
// Record i goes to partition i mod (TOPICS x PARTITIONS) round-robin (bench.workloads.TopicSet
// place()), key and value both the decimal i, timestamp the moment of send() (the bench's source
// topics replace it with the broker's append time). It reads every topic's metadata, prints
// "ready", waits for a line on stdin (and ends at EOF), produces RATE records/s in 10 ms slices for
// SECONDS, flushes, writes line i of file SENT for record i: "send_epoch_ms ack_ms" (when send() was
// called, and how long until it was acknowledged), and prints "acked p50_ms=.. p99_ms=.. max_ms=.."
// (its own send-to-acknowledgement times) and "sent N".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class PacedProducer {
    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (Exception e) {
            // Kafka's exceptions carry no stack trace, and the source launcher then fails trimming
            // it ("IllegalArgumentException: 0 > -7"), hiding the error: say it here.
            System.err.println("PacedProducer: " + e);
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        String bootstrap = args[0];
        int rate = Integer.parseInt(args[1]);
        int seconds = Integer.parseInt(args[2]);
        int partitions = Integer.parseInt(args[3]);
        String sentFile = args[4];
        List<String> topics = Arrays.asList(args).subList(5, args.length);
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("linger.ms", "5");
        config.put("acks", "all");
        config.put("enable.idempotence", "true");
        // A partition's open batch takes batch.size from the 32 MB buffer pool however few records it
        // holds: at the default 16 KB, a thousand partitions with a batch open and one in flight use
        // it all, and send() blocks, so the load stops being paced. The records are a few bytes.
        config.put("batch.size", "2048");

        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            // Every topic's leaders known before "ready"; thousands of partitions created a moment ago
            // may take longer than one max.block.ms to all have one.
            long deadline = System.nanoTime() + 300_000_000_000L;
            for (String topic : topics) {
                while (true) {
                    try {
                        producer.partitionsFor(topic);
                        break;
                    } catch (org.apache.kafka.common.errors.TimeoutException e) {
                        if (System.nanoTime() > deadline) {
                            throw e;
                        }
                    }
                }
            }
            System.out.println("ready");
            System.out.flush();
            if (new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine() == null) {
                return; // the bench went away before saying go
            }
            int total = topics.size() * partitions;
            long[] ackNanos = new long[rate * seconds];
            long[] sentAt = new long[rate * seconds];
            double perSlice = rate / 100.0;
            long started = System.nanoTime();
            long startedEpochMs = System.currentTimeMillis();
            long sent = 0;
            for (long slice = 0; slice < seconds * 100L; slice++) {
                long due = (long) (perSlice * (slice + 1));
                while (sent < due) {
                    int place = (int) (sent % total);
                    byte[] bytes = Long.toString(sent).getBytes(StandardCharsets.US_ASCII);
                    final int index = (int) sent;
                    sentAt[index] = System.nanoTime();
                    producer.send(
                        new ProducerRecord<>(topics.get(place / partitions), place % partitions, bytes, bytes),
                        (metadata, error) -> ackNanos[index] = System.nanoTime() - sentAt[index]);
                    sent++;
                }
                long sleepNanos = started + (slice + 1) * 10_000_000L - System.nanoTime();
                if (sleepNanos > 0) {
                    Thread.sleep(sleepNanos / 1_000_000L, (int) (sleepNanos % 1_000_000L));
                }
            }
            producer.flush();
            try (java.io.PrintWriter out = new java.io.PrintWriter(sentFile, StandardCharsets.US_ASCII)) {
                for (int i = 0; i < sent; i++) {
                    out.println((startedEpochMs + (sentAt[i] - started) / 1e6) + " " + ackNanos[i] / 1e6);
                }
            }
            long[] sorted = ackNanos.clone();
            Arrays.sort(sorted);
            System.out.println("acked p50_ms=" + sorted[sorted.length / 2] / 1e6 + " p99_ms="
                + sorted[(int) (sorted.length * 0.99)] / 1e6 + " max_ms=" + sorted[sorted.length - 1] / 1e6);
            System.out.println("sent " + sent);
        }
    }
}
