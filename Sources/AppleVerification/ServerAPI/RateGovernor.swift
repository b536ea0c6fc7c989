import Foundation
import Synchronization

/// Apple's App Store Server API limits requests per app, endpoint and environment (50 a second in
/// Production for Get Transaction Info, a tenth in Sandbox) and answers 429 past it. Left to themselves, a
/// thousand jobs in flight each discover the limit alone and turn a spike into a 429 storm. The governor
/// keeps each lane (endpoint and environment; apps later) to at most its rate in any second, its requests
/// spaced evenly (a burst of a second's worth at once would turn 50 ms of jitter into a second's excess), and a 429 pauses the whole lane until its `Retry-After`, not only the job that
/// met it. Waiting is not an attempt: nothing is sent, nothing fails.
public final class RateGovernor: Sendable {
    public struct Lane: Hashable, Sendable, CustomStringConvertible {
        public let endpoint: String
        public let sandbox: Bool
        public init(endpoint: String, sandbox: Bool) {
            self.endpoint = endpoint
            self.sandbox = sandbox
        }
        public var description: String { "\(endpoint)_\(sandbox ? "sandbox" : "production")" }
    }

    /// Told of every wait for a lane (for metrics), and of every pause.
    public typealias Observer = @Sendable (_ lane: Lane, _ waited: Duration, _ paused: Bool) -> Void

    private struct LaneState {
        /// The earliest start the next waiter may be given: starts are handed out in order, spaced evenly
        /// (``spacing`` over the rate apart), so a stall of some milliseconds moves a request or two between
        /// Apple's seconds, never a second's burst.
        var nextStart: ContinuousClock.Instant?
        /// When the last `rate` requests were let go, oldest first. A waiter woken late (a busy machine wakes
        /// many sleepers together) goes only if fewer than `rate` went in the last second; otherwise it
        /// queues again. This, not the schedule, is what keeps a lane under Apple's limit.
        var released: [ContinuousClock.Instant] = []
        var pausedUntil: ContinuousClock.Instant?
    }

    /// A second, and 50 ms for the network's jitter: the schedule's spacing is this over the rate.
    static let spacing = Duration.milliseconds(1_050)
    /// Apple's second: at most `rate` requests are let go in any such window.
    static let second = Duration.seconds(1)

    /// Requests a second of a Production lane, for the whole pool; a Sandbox lane gets a tenth (at least 1).
    public let productionRate: Int
    /// This replica's share of the pool's rate (0 to 1): its share of the jobs topic's partitions. 1 until
    /// told otherwise.
    private let share = Mutex<Double>(1)
    /// The longest a 429 may pause a lane.
    public let maximumPause: Duration
    private let observer: Observer?
    private let lanes = Mutex<[Lane: LaneState]>([:])

    public init(productionRate: Int, maximumPause: Duration, observer: Observer? = nil) {
        self.productionRate = max(1, productionRate)
        self.maximumPause = maximumPause
        self.observer = observer
    }

    /// This replica's requests a second on `lane`: its share of the pool's rate, at least one.
    public func rate(of lane: Lane) -> Int {
        let pool = lane.sandbox ? max(1, productionRate / 10) : productionRate
        let share = self.share.withLock { $0 }
        return max(1, Int((Double(pool) * share).rounded(.down)))
    }

    /// Sets this replica's share of the pool's rate (its share of the jobs topic's partitions); waiters
    /// already given a start keep it, the next ones are spaced at the new rate.
    public func setShare(_ fraction: Double) {
        guard fraction.isFinite else { return }
        share.withLock { $0 = min(max(fraction, 0), 1) }
    }

    /// Waits until `lane` may send one request; returns how long it waited. Waiters are given start times
    /// in order, so they are served first come, first served; one that wakes into a pause that began after
    /// it took its time, or with a second's worth already sent, takes a new one.
    @discardableResult
    public func acquire(_ lane: Lane) async -> Duration {
        let began = ContinuousClock.now
        let rate = rate(of: lane)
        var notBefore = began
        while true {
            let now = ContinuousClock.now
            let start = lanes.withLock { lanes -> ContinuousClock.Instant in
                var state = lanes[lane] ?? LaneState()
                let start = max(now, notBefore, state.pausedUntil ?? now, state.nextStart ?? now)
                state.nextStart = start + Self.spacing / rate
                lanes[lane] = state
                return start
            }
            if start > now { try? await Task.sleep(until: start) }
            // Cancelled (its job let go): it sends nothing, so it takes nothing of the second's count.
            if Task.isCancelled {
                let waited = ContinuousClock.now - began
                observer?(lane, waited, false)
                return waited
            }
            let refusedUntil = lanes.withLock { lanes -> ContinuousClock.Instant? in
                let now = ContinuousClock.now
                var state = lanes[lane] ?? LaneState()
                if let paused = state.pausedUntil, paused > now { return paused }
                if state.released.count >= rate, let oldest = state.released.first, now - oldest < Self.second {
                    return oldest + Self.second
                }
                state.released.append(now)
                if state.released.count > rate { state.released.removeFirst(state.released.count - rate) }
                lanes[lane] = state
                return nil
            }
            guard let refusedUntil else {
                let waited = ContinuousClock.now - began
                observer?(lane, waited, false)
                return waited
            }
            notBefore = refusedUntil
        }
    }

    /// Apple answered 429: nobody on `lane` sends before `retryAfter` from now (at most ``maximumPause``;
    /// a second when Apple did not say).
    public func pause(_ lane: Lane, retryAfter: Duration?) {
        let until = ContinuousClock.now + min(retryAfter ?? .seconds(1), maximumPause)
        lanes.withLock { lanes in
            var state = lanes[lane] ?? LaneState()
            state.pausedUntil = max(state.pausedUntil ?? until, until)
            lanes[lane] = state
        }
        observer?(lane, .zero, true)
    }
}
