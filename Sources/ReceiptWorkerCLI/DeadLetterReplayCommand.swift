import Vocabulary
import Foundation
import Kafka
import Observability
import ReceiptWorker
import Runtime

enum DeadLetterReplayCommand {
    static let help = """
        usage: receipt-worker dlq replay [--config FILE] [--set key=value]... [--reason REASON]...
                                         [--since TIME] [--until TIME] [--dry-run]

        Reads topics.dlq from its oldest letter (or the first written at --since) to where it ended when the
        command started, and sends each matching letter back to the topic it was taken from
        (dlq_source_topic: topics.jobs, topics.consumption or topics.notifications; without that header, a
        consumption answer to topics.consumption and anything else to topics.jobs), with its original key and
        value and a dlq_replayed_from header. A truncated letter (its value is gone) is listed, not replayed. One line per letter, then a summary. Replaying is safe to repeat: the worker answers a
        job_id it already decided with its stored event, so a letter replayed twice is not granted twice.
        Typical use: after an Apple outage outlasted retry.max_attempts, replay --reason retries_exhausted.

        options:
          --reason REASON   only letters with this dlq_reason (repeatable): malformed_job,
                            retries_exhausted, cannot_verify, consumption_not_sent. Without it every reason
                            but consumption_not_sent: a refund request's answer is replayed only by name (the
                            grant service may have sent a corrected one since), and goes back with the place
                            its original was read (dlq_first_read), so a newer answer still supersedes it
          --since TIME      only letters written at or after TIME (RFC 3339, e.g. 2026-11-29T03:00:00Z)
          --until TIME      only letters written before TIME
          --dry-run         print what would be replayed; send nothing
          --config FILE, --set key=value    kafka.*, topics.dlq, topics.jobs and topics.consumption,
                                            as for `run`

        Exit codes: 0 done (also when nothing matched); 1 broker failure, no such topic, interrupted, or no letter
        read for 20 s before the end; 2 usage error.
        """

    /// Seconds without a letter (or a position) before the end, after which the command gives up.
    static let stallSeconds = 20

    struct Filter {
        var reasons: Set<String>
        var since: Date?
        var until: Date?

        func matches(_ letter: InboundMessage) -> Bool {
            let reason = letter.header(DeadLetterHeader.reason)?.stringValue ?? ""
            if !reasons.isEmpty && !reasons.contains(reason) { return false }
            // A refund request's answer only when asked for by name: the grant service may have sent a corrected
            // one since, and Apple takes the last it gets.
            if reasons.isEmpty && reason == DeadLetterReason.consumptionNotSent.rawValue { return false }
            let written = letter.timestamp ?? .distantPast
            if let since, written < since { return false }
            if let until, written >= until { return false }
            return true
        }
    }

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try Options(
            arguments, valued: Options.configurationOptions.union(["--reason", "--since", "--until"]),
            flags: ["--dry-run"])
        let reasons = Set(options.all("--reason"))
        // A reason that never occurs would replay nothing and look like success.
        for reason in reasons where DeadLetterReason(rawValue: reason) == nil {
            throw UsageError(
                "--reason \(reason) is not a DLQ reason (\(DeadLetterReason.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        let configuration = try options.configuration(purpose: .tool)
        let filter = Filter(
            reasons: reasons, since: try time(options, "--since"),
            until: try time(options, "--until"))
        let dryRun = options.has("--dry-run")

        let consumer = try ToolKafka.reader(configuration)
        let producer = dryRun ? nil : try ToolKafka.producer(configuration)
        var ends: [TopicPartition: Int64] = [:]  // the offset each partition ended at when we started
        var unfinished: Set<TopicPartition> = []
        // With --since, the broker's time index skips what was written before: no need to read it all.
        let from: KafkaConsumer.StartOffset = filter.since.map { .time($0) } ?? .beginning
        for (partition, start) in try await consumer.assign(topic: configuration.topics.dlq, from: from) {
            let marks = try await consumer.watermarks(partition)
            ends[partition] = marks.high
            let first = start.map { $0 < 0 ? marks.high : $0 } ?? marks.low
            if marks.high > first { unfinished.insert(partition) }
        }
        let interrupted = AtomicFlag()
        TerminationSignals.install { _ in
            interrupted.set()
            consumer.endEvents()
        }
        // A broker that stops answering after the assignment is no fatal error: without this the command would
        // wait for ever, and a Ctrl-C would then look like success.
        let progress = ProgressWatch(stallSeconds: Self.stallSeconds) { consumer.endEvents() }
        defer { progress.stop() }
        var (read, replayed) = (0, 0)
        var failure: (any Error)?
        if unfinished.isEmpty { consumer.endEvents() }  // an empty topic: nothing to read
        reading: for await event in consumer.events {
            progress.moved()
            switch event {
            case .message(let letter):
                guard let end = ends[letter.topicPartition], letter.offset < end else {
                    unfinished.remove(letter.topicPartition)
                    if unfinished.isEmpty { break reading } else { continue }
                }
                read += 1
                let reason = letter.header(DeadLetterHeader.reason)?.stringValue ?? "-"
                let matched = filter.matches(letter)
                let written = letter.timestamp.map { RFC3339.format($0) } ?? "-"
                let route = matched ? Self.destination(of: letter, reason: reason, configuration) : nil
                let destination = try? route?.get()
                let action =
                    !matched ? "skipped " : destination == nil ? "cannot replay" : dryRun ? "would replay" : "replayed"
                if let destination, let producer {
                    // With the original's headers that say what it is (kept on the letter), so it is read as it was.
                    let job = OutboundMessage(
                        topic: destination, key: letter.key, value: letter.value,
                        headers: DeadLetterHeader.kept(from: letter.headers) + [
                            MessageHeader(
                                name: DeadLetterHeader.replayedFrom, string: "\(letter.topicPartition)@\(letter.offset)"
                            )
                        ]
                            + (DeadLetterHeader.firstRead(of: letter).map {
                                [MessageHeader(name: DeadLetterHeader.firstRead, string: $0)]
                            } ?? []))
                    // A send has its own deadline (a broker that does not take it fails it): not a stall.
                    progress.hold()
                    defer { progress.moved() }
                    do {
                        _ = try await producer.send(job)
                    } catch {
                        failure = error
                        break reading
                    }
                }
                if destination != nil { replayed += 1 }
                var note = ""
                if case .failure(let unroutable) = route { note = unroutable.why }
                if !matched, filter.reasons.isEmpty, reason == DeadLetterReason.consumptionNotSent.rawValue {
                    note = "(replayed only with --reason consumption_not_sent) "
                }
                emit(
                    "\(action)  \(letter.topicPartition)@\(letter.offset)  \(reason)  \(written)  \(note)\(letter.header(DeadLetterHeader.error)?.stringValue ?? "")"
                )
                if letter.offset >= end - 1 {
                    unfinished.remove(letter.topicPartition)
                    if unfinished.isEmpty { break reading }
                }
            case .fatalError(let error):
                failure = error
                break reading
            case .positions(let positions):
                // Past the end without a letter at its last offset (a transaction's marker there): read.
                for (partition, next) in positions where next >= ends[partition] ?? .max {
                    unfinished.remove(partition)
                }
                if unfinished.isEmpty { break reading }
            case .partitionsAssigned, .partitionsRevoked:
                continue
            }
        }
        await consumer.close()
        await producer?.close()
        if let failure {
            complain("\(failure)")
            return 1
        }
        if !unfinished.isEmpty {
            let why =
                interrupted.isSet
                ? "interrupted" : "no letter read for \(Self.stallSeconds) s: the broker does not answer"
            complain(
                "\(why); \(dryRun ? "would have replayed" : "replayed") \(replayed) of the \(read) letters read, "
                    + "\(unfinished.count) partition(s) of \(configuration.topics.dlq) not read to their end. "
                    + "Running it again replays those letters again: a job already decided is answered with its stored"
                    + " event; a consumption answer is sent to Apple again")
            return 1
        }
        emit(
            "\(dryRun ? "would replay" : "replayed") \(replayed) of \(read) dead letters from \(configuration.topics.dlq) to \(configuration.topics.jobs) (consumption answers to \(configuration.topics.consumption))"
        )
        return 0
    }

    /// Where a letter goes back to: the topic it was taken from (`dlq_source_topic`), when it is one this
    /// configuration names; for a message parked on the retries topic, the topic it was first read from
    /// (its `parked_from`: the jobs or the consumption topic); a letter without that header by its reason (a
    /// consumption answer is no job: the jobs topic would dead-letter it again). A truncated letter, whose value is gone, and one from a topic
    /// this configuration does not know go nowhere: `.failure` says why, for the letter's line.
    static func destination(of letter: InboundMessage, reason: String, _ configuration: WorkerConfiguration)
        -> Result<String, Unroutable>
    {
        if letter.header(DeadLetterHeader.truncated)?.stringValue == "true" {
            return .failure(Unroutable(why: "(truncated: read the original at its source offset) "))
        }
        let topics = configuration.topics
        guard let source = letter.header(DeadLetterHeader.sourceTopic)?.stringValue else {
            return .success(reason == "consumption_not_sent" ? topics.consumption : topics.jobs)
        }
        // A message parked on the retries topic (its game's room was full) goes back where it was first read.
        if source == topics.retries {
            let origin = ParkedOrigin(of: letter)?.topic
            if origin == topics.consumption || (origin == nil && reason == "consumption_not_sent") {
                return .success(topics.consumption)
            }
            return .success(topics.jobs)
        }
        guard [topics.jobs, topics.consumption, topics.notifications].contains(source) else {
            return .failure(Unroutable(why: "(from \(source), not a topic of this configuration) "))
        }
        return .success(source)
    }

    struct Unroutable: Error {
        let why: String
    }

    static func time(_ options: Options, _ name: String) throws -> Date? {
        guard let text = options.value(name) else { return nil }
        guard let date = RFC3339.parse(text) else {
            throw UsageError("\(name) must be an RFC 3339 time such as 2026-11-29T03:00:00Z")
        }
        return date
    }
}
