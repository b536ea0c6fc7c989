import Foundation
import Synchronization

/// Apple's App Store Server API limits requests per app, endpoint and environment (50 a second in
/// Production for Get Transaction Info, a tenth in Sandbox) and answers 429 past it. Left to themselves, a
/// thousand jobs in flight each discover the limit alone and turn a spike into a 429 storm. The governor
/// keeps each lane (endpoint and environment; apps later) to at most its rate in any second, bursts of one
/// second's worth included, and a 429 pauses the whole lane until its `Retry-After`, not only the job that
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
        /// The start times given out for the last `rate` requests, oldest first: a new one starts no
        /// sooner than one second after the oldest of them.
        var starts: [ContinuousClock.Instant] = []
        var pausedUntil: ContinuousClock.Instant?
    }

    /// A second, and 50 ms for the network: requests spaced by exactly a second leave the worker on time but
    /// may reach Apple closer together, and count as a second's worth too many.
    static let window = Duration.milliseconds(1_050)

    /// Requests a second of a Production lane; a Sandbox lane gets a tenth (at least 1).
    public let productionRate: Int
    /// The longest a 429 may pause a lane.
    public let maximumPause: Duration
    private let observer: Observer?
    private let lanes = Mutex<[Lane: LaneState]>([:])

    public init(productionRate: Int, maximumPause: Duration, observer: Observer? = nil) {
        self.productionRate = max(1, productionRate)
        self.maximumPause = maximumPause
        self.observer = observer
    }

    public func rate(of lane: Lane) -> Int { lane.sandbox ? max(1, productionRate / 10) : productionRate }

    /// Waits until `lane` may send one request; returns how long it waited. Start times are handed out in
    /// order, so waiters are served first come, first served; one woken into a pause that began after it
    /// took its time takes a new one.
    @discardableResult
    public func acquire(_ lane: Lane) async -> Duration {
        let began = ContinuousClock.now
        let rate = rate(of: lane)
        while true {
            let now = ContinuousClock.now
            let start = lanes.withLock { lanes -> ContinuousClock.Instant in
                var state = lanes[lane] ?? LaneState()
                var start = max(now, state.pausedUntil ?? now)
                if state.starts.count >= rate {
                    start = max(start, state.starts[state.starts.count - rate] + Self.window)
                }
                state.starts.append(start)
                if state.starts.count > rate { state.starts.removeFirst(state.starts.count - rate) }
                lanes[lane] = state
                return start
            }
            if start > now { try? await Task.sleep(until: start) }
            let pausedSince = lanes.withLock { $0[lane]?.pausedUntil }.map { $0 > ContinuousClock.now } ?? false
            if !pausedSince || Task.isCancelled {
                let waited = ContinuousClock.now - began
                observer?(lane, waited, false)
                return waited
            }
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
