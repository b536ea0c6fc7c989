public import Foundation

/// Where the wait of whoever waits on a message began, and what it is about: a player's job from its send (the
/// record's Kafka timestamp, the producer's create time), Apple's notification from its signing. Measured to the
/// message's answer acknowledged by the broker, whatever happened between: the backlog in Kafka, a rebalance, a
/// paused intake, a stay on `topics.retries`.
public struct WaitStart: Sendable, Equatable {
    /// `job` or `notification`: names the metrics (`receipt_worker_job_wait_seconds`, ...).
    public var flow: String
    /// The app (game) the message is about; few and known (never a client's text).
    public var app: String
    public var at: Date

    public init(flow: String, app: String, at: Date) {
        self.flow = flow
        self.app = app
        self.at = at
    }
}
