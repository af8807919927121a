// The steady loads' latency reader, run with Java's single-file launcher on the Kafka jars:
//
//   java -cp '<kafka libs>/*' bench/LatencyReader.java BOOTSTRAP FETCH_WAIT_MS PARTITIONS EXPECTED OUT TOPIC...
//
// Why Java: librdkafka has no incremental fetch sessions, so a Python reader sends all of its
// partitions in every fetch, and the broker re-reads all of them whenever any one has new data. One
// such reader of 1,000 partitions took most of a core of the target broker on this 2-core machine
// (a JFR profile: fetch handling), starving the source broker and the contender it measures. Kafka's
// own consumer sends only the partitions that changed, as the consumers of most MM2 users do.
//
// It waits until every topic has PARTITIONS partitions, reads them all read_committed from the
// start, prints "warm N" once the N partitions' warm-up records (key "warm-up") have arrived, and
// "all" once EXPECTED distinct other keys have. At a line on stdin (or EOF)
// it writes one line per record received, warm-up aside: "key arrival_ms latency_ms", latency being
// arrival time - record timestamp, and prints "done".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class LatencyReader {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String fetchWaitMs = args[1];
        int partitions = Integer.parseInt(args[2]);
        int expected = Integer.parseInt(args[3]);
        String out = args[4];
        List<String> topics = Arrays.asList(args).subList(5, args.length);
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("isolation.level", "read_committed");
        config.put("enable.auto.commit", "false");
        config.put("fetch.max.wait.ms", fetchWaitMs);
        config.put("key.deserializer", ByteArrayDeserializer.class.getName());
        config.put("value.deserializer", ByteArrayDeserializer.class.getName());
        AtomicBoolean stopping = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            } catch (Exception ignored) {
                // EOF or a closed pipe: stop all the same
            }
            stopping.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        List<String> keys = new ArrayList<>();
        List<Double> arrivals = new ArrayList<>();
        List<Double> latencies = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            List<TopicPartition> assignment = new ArrayList<>();
            while (!stopping.get() && assignment.isEmpty()) {
                Map<String, List<PartitionInfo>> existing = consumer.listTopics(Duration.ofSeconds(10));
                if (topics.stream().allMatch(t -> existing.containsKey(t) && existing.get(t).size() >= partitions)) {
                    for (String topic : topics) {
                        for (int p = 0; p < partitions; p++) {
                            assignment.add(new TopicPartition(topic, p));
                        }
                    }
                } else {
                    Thread.sleep(500);
                }
            }
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            int warm = 0;
            Set<String> distinct = new HashSet<>();
            while (!stopping.get()) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    Instant now = Instant.now();
                    double arrivedMs = now.getEpochSecond() * 1000.0 + now.getNano() / 1e6;
                    String key = new String(record.key(), StandardCharsets.US_ASCII);
                    if (key.equals("warm-up")) {
                        warm++;
                        if (warm == assignment.size()) {
                            System.out.println("warm " + warm);
                            System.out.flush();
                        }
                        continue;
                    }
                    keys.add(key);
                    arrivals.add(arrivedMs);
                    latencies.add(arrivedMs - record.timestamp());
                    if (distinct.add(key) && distinct.size() == expected) {
                        System.out.println("all");
                        System.out.flush();
                    }
                }
            }
        }
        try (PrintWriter writer = new PrintWriter(out, StandardCharsets.US_ASCII)) {
            for (int i = 0; i < keys.size(); i++) {
                writer.println(keys.get(i) + " " + arrivals.get(i) + " " + latencies.get(i));
            }
        }
        System.out.println("done");
        System.out.flush();
    }
}
