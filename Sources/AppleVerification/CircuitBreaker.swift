import Synchronization

/// Stops calls to Apple while it fails broadly, so jobs wait instead of burning their retries, and lets
/// them through again by itself: after a cool-down one trial call is allowed; its success closes the
/// breaker, its failure re-opens it for twice as long (up to `maxCooldown`).
public final class CircuitBreaker: Sendable {
    public enum State: String, Sendable { case closed, open, halfOpen = "half_open" }

    private struct Window {
        var outcomes: [Bool] = []  // true = transient failure
        var next = 0
        var failures = 0
        var state = State.closed
        var openUntil = ContinuousClock.now
        var cooldown: Duration
        /// When the half-open state's one trial call was let through (nil: none yet).
        var trialSince: ContinuousClock.Instant?
    }

    private let window: Mutex<Window>
    private let size: Int
    private let minimumCalls: Int
    private let failureRatio: Double
    private let initialCooldown: Duration
    private let maxCooldown: Duration

    public init(
        windowSize: Int = 100, minimumCalls: Int = 20, failureRatio: Double = 0.5, cooldown: Duration = .seconds(1),
        maxCooldown: Duration = .seconds(30)
    ) {
        self.size = windowSize
        self.minimumCalls = minimumCalls
        self.failureRatio = failureRatio
        self.initialCooldown = cooldown
        self.maxCooldown = maxCooldown
        self.window = Mutex(Window(cooldown: cooldown))
    }

    /// The state as a caller would meet it now (open past its cool-down reads half-open). Only reads: the
    /// metrics gauge asks on every scrape, and the move to half-open, which resets the trial, is the waiting
    /// caller's to make.
    public var state: State {
        window.withLock { window in
            window.state == .open && ContinuousClock.now >= window.openUntil ? .halfOpen : window.state
        }
    }

    /// A trial whose caller never reported (it was let go at a stop) no longer blocks the next one after this.
    static let trialTimeout: Duration = .seconds(30)

    /// Waits while the breaker is open. Returns at once when closed. Half-open, it lets exactly one caller
    /// through (the trial) and holds the others until the trial's outcome closes or re-opens the breaker:
    /// a thousand waiting jobs must not all test a recovering Apple at once. True for the trial, whose caller must
    /// report (``record(success:)``, or ``recordNeither()`` when it sent nothing or was cancelled).
    @discardableResult
    public func waitUntilCallsAllowed() async -> Bool {
        var trial = false
        while true {
            let wait: Duration? = window.withLock { window in
                let now = ContinuousClock.now
                if window.state == .open {
                    let remaining = window.openUntil - now
                    guard remaining <= .zero else { return remaining }
                    window.state = .halfOpen
                    window.trialSince = nil
                }
                guard window.state == .halfOpen else { return nil }
                if let since = window.trialSince, now - since < Self.trialTimeout { return .milliseconds(50) }
                window.trialSince = now
                trial = true
                return nil
            }
            guard let wait else { return trial }
            try? await Task.sleep(for: min(wait, .milliseconds(500)))
            if Task.isCancelled { return false }
        }
    }

    /// A call that says nothing of Apple's health either way (a 21002 for a receipt Apple never signed, which Apple
    /// also answers while it fails 21002 for genuine ones): counted neither way; half-open, its trial is given back,
    /// so the next caller tries at once.
    public func recordNeither() {
        window.withLock { window in
            if window.state == .halfOpen { window.trialSince = nil }
        }
    }

    public func record(success: Bool) {
        window.withLock { window in
            if window.state == .halfOpen {
                if success {
                    window = Window(cooldown: initialCooldown)
                } else {
                    window.cooldown = min(window.cooldown * 2, maxCooldown)
                    window.state = .open
                    window.openUntil = .now + window.cooldown
                }
                return
            }
            let failed = !success
            if window.outcomes.count < size {
                window.outcomes.append(failed)
            } else {
                if window.outcomes[window.next] { window.failures -= 1 }
                window.outcomes[window.next] = failed
                window.next = (window.next + 1) % size
            }
            if failed { window.failures += 1 }
            if window.state == .closed, window.outcomes.count >= minimumCalls,
                Double(window.failures) / Double(window.outcomes.count) >= failureRatio
            {
                window.state = .open
                window.openUntil = .now + window.cooldown
            }
        }
    }
}

/// One app's circuit breakers, one per Apple call (endpoint and environment: `verify_receipt_production`,
/// `transaction_info_sandbox`, ...): Apple failing for one app, one endpoint or one environment stops only
/// those calls. What opens one is Apple failing (timeouts, 5xx, its retryable statuses), never Apple
/// answering: a 429 is the lane's, which the rate governor pauses; a wrong shared secret (21004) or key is
/// this app's configuration.
public final class CircuitBreakers: Sendable {
    private let breakers = Mutex<[String: CircuitBreaker]>([:])
    private let make: @Sendable () -> CircuitBreaker

    public init(make: @escaping @Sendable () -> CircuitBreaker = { CircuitBreaker() }) {
        self.make = make
    }

    /// The breaker of `call`, made on first use.
    public func breaker(for call: String) -> CircuitBreaker {
        breakers.withLock { breakers in
            if let existing = breakers[call] { return existing }
            let made = make()
            breakers[call] = made
            return made
        }
    }

    /// Every call's breaker state now, for the `receipt_worker_circuit_state` gauge.
    public var states: [(call: String, state: CircuitBreaker.State)] {
        breakers.withLock { $0 }.map { ($0.key, $0.value.state) }.sorted { $0.call < $1.call }
    }
}
