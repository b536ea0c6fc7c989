public import Kafka
public import Observability

/// What the runtime is configured with: the topics and their handlers, the budgets, the drain and stall
/// times, and how it retries the broker.
public struct RuntimeConfiguration: Sendable {
    /// One topic the runtime reads, with its handler.
    public struct Route: Sendable {
        public var topic: String
        public var handler: any MessageHandler
        /// Counted for every message of the topic taken (for example `receipt_worker_jobs_consumed_total`).
        public var taken: Counter?
        /// The groups this topic's messages go to (nil: any): the topic pauses when one of them is full and
        /// its messages cannot be parked.
        public var groups: Set<String>?
        /// Whether a message of a full group goes, unchanged, to ``Parking/topic`` to wait there (read again
        /// and handled by this route), instead of this topic pausing for every group.
        public var parks: Bool
        /// Whether a message's trace begins here: its `traceparent` names a trace its producer started and recorded
        /// nothing of (the receiver's, for a notification), so the `process` span is that trace's root, recorded
        /// by ``tracer``'s ratio, not by the flag. Else the sampler is parent-based.
        public var beginsTraces: Bool

        public init(
            topic: String, handler: any MessageHandler, taken: Counter? = nil, groups: Set<String>? = nil,
            parks: Bool = false, beginsTraces: Bool = false
        ) {
            self.topic = topic
            self.handler = handler
            self.taken = taken
            self.groups = groups
            self.parks = parks
            self.beginsTraces = beginsTraces
        }
    }

    /// Where the messages of a full group wait (`topics.retries`), one partition per lane: a full group
    /// pauses only its lane's partition, so the groups of other lanes are read on. Each message there carries
    /// `parked_from` (`TOPIC[PARTITION]@OFFSET`, where it was first read) and is handled by that topic's route.
    public struct Parking: Sendable {
        public var topic: String
        /// Each group's lane; its messages go to partition lane modulo the topic's partition count. Groups of
        /// one lane share a partition (an app's jobs and its consumption answers); a group without a lane
        /// pauses the whole topic when it is full.
        public var lanes: [String: Int]

        public init(topic: String, lanes: [String: Int]) {
            self.topic = topic
            self.lanes = lanes
        }
    }

    public var routes: [Route]
    /// Where routes that park send the messages of a full group (nil: their topics pause instead).
    public var parking: Parking?
    /// The dead-letter topic (`topics.dlq`).
    public var deadLetterTopic: String
    /// The groups the handlers may name, so that each group's gauges show from the start (a group first named
    /// later still gets its budget).
    public var groups: [String] = []
    /// Messages being handled at once per group (`worker.max_in_flight`); a group may hold ten times as many
    /// waiting before its messages are parked (or its topics pause). Default: 1000.
    public var maxInFlight = 1000
    /// Bytes of messages being handled at once per group (`worker.max_in_flight_bytes`); a quarter of it
    /// waiting. A message larger than the whole budget still starts, alone. The replica holds at most twice
    /// it in all before every topic pauses. Default: 32 MiB.
    public var maxInFlightBytes = 32 * 1024 * 1024
    /// How long a shutdown or a revocation waits for messages in flight (`worker.drain_timeout_ms`). Default: 20 s.
    public var drainTimeout: Duration = .seconds(20)
    /// A partition with lag and no progress this long is stalled (`worker.stall_timeout_ms`). Default: 60 s.
    public var stallTimeout: Duration = .seconds(60)
    /// Backoff between attempts at the broker and at a handler's services.
    public var retry = RetryPolicy()
    /// The largest record the producer sends (`kafka.message.max.bytes`). Default: librdkafka's 1,000,000.
    public var maxRecordBytes = 1_000_000
    /// Spans of each message's handling (`otel.*`): a `process` span per message, a child per service call, a
    /// producer span per record published. Nil: no spans, and the consumed trace context copied unchanged.
    public var tracer: Tracer? = nil

    public init(routes: [Route], deadLetterTopic: String) {
        self.routes = routes
        self.deadLetterTopic = deadLetterTopic
    }
}
