/// The headers a dead letter carries (docs/contract.md, the dead-letter topic): written by the runtime, read by
/// `receipt-worker dlq replay`.
public enum DeadLetterHeader {
    public static let reason = "dlq_reason"
    public static let error = "dlq_error"
    public static let sourceTopic = "dlq_source_topic"
    public static let sourcePartition = "dlq_source_partition"
    public static let sourceOffset = "dlq_source_offset"
    public static let attempts = "dlq_attempts"
    /// `true` on a stub: the message was too large to copy with the headers; `dlq_original_bytes` says its size.
    public static let truncated = "dlq_truncated"
    public static let originalBytes = "dlq_original_bytes"
    /// On a letter put back on its topic: where it was read on the dead-letter topic.
    public static let replayedFrom = "dlq_replayed_from"
    /// On a letter put back on its topic (and on a dead letter of such a record): where the original was first read,
    /// `TOPIC[PARTITION]@OFFSET`. A replayed consumption answer is ordered among its transaction's answers by it,
    /// not by its new place: an answer the grant service corrected since stays the newest.
    public static let firstRead = "dlq_first_read"

    /// A ``firstRead`` as the worker writes it: a ``ReadPlace``; nil for anything
    /// else (a producer's header of that name is not copied or believed past this).
    public static func validFirstRead(_ message: InboundMessage) -> String? {
        guard message.header(replayedFrom) != nil, let text = message.header(firstRead)?.stringValue,
            ReadPlace(text) != nil
        else { return nil }
        return text
    }

    /// Where the record a dead letter holds was first read: a replay's ``firstRead``, a parked message's
    /// `parked_from`, else the letter's source topic, partition and offset; nil when the letter names none.
    public static func firstRead(of letter: InboundMessage) -> String? {
        if let replayed = letter.header(firstRead)?.stringValue, replayed.utf8.count <= ReadPlace.maxBytes {
            return replayed
        }
        if let parked = letter.header(ParkedOrigin.header)?.stringValue { return parked }
        guard let topic = letter.header(sourceTopic)?.stringValue,
            let partition = letter.header(sourcePartition)?.stringValue.flatMap(Int32.init),
            let offset = letter.header(sourceOffset)?.stringValue.flatMap(Int64.init)
        else { return nil }
        return ReadPlace(TopicPartition(topic: topic, partition: partition), offset: offset).description
    }
    /// The original's headers a dead letter keeps, and a replay puts back: those that say what the record is, without
    /// which its value would be read as something else (a subscription's status as Apple's notification, a
    /// policy's answer as a grant service's). Only with the values the worker writes (a bundle id of at most 255
    /// bytes), the first of each name: whatever a producer put on a job, a dead letter grows by a few hundred bytes
    /// at most.
    public static func kept(from headers: [MessageHeader]) -> [MessageHeader] {
        var seen: Set<String> = []
        return headers.filter { header in
            let known =
                switch header.name {
                case RecordHeader.source: header.stringValue == RecordHeader.statusSource
                case RecordHeader.answeredBy: header.stringValue == RecordHeader.byPolicy
                case RecordHeader.bundleID: (header.value?.count ?? 0) <= 255 && header.stringValue != nil
                default: false
                }
            return known && seen.insert(header.name).inserted
        }
    }
}

/// Headers that say what a record on a flow's topic is.
public enum RecordHeader {
    /// On `topics.notifications`: what the worker made a record from (``statusSource``); absent on Apple's.
    public static let source = "source"
    /// ``source``'s one value: a subscription's status asked of Apple.
    public static let statusSource = "subscription_status"
    /// On `topics.notifications`: the app's bundle id.
    public static let bundleID = "bundle_id"
    /// On `topics.consumption`: an answer an app's policy made (``byPolicy``), not a grant service.
    public static let answeredBy = "answered_by"
    public static let byPolicy = "policy"
}
