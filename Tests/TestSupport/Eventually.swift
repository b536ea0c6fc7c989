/// Waits for `condition` to hold, checking it first every `interval`, then less and less often (up to every
/// 200 ms), until `timeout`. Returns whether it held. For conditions that have no event to await; never a
/// fixed sleep-and-hope. The timeout is a failure's bound, never a figure: generous, because on a machine busy
/// with other work (or with three hundred tests at once) what takes a second idle can take twenty.
public func eventually(
    timeout: Duration = .seconds(60), interval: Duration = .milliseconds(10), _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    var wait = interval
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: wait)
        wait = min(wait * 2, max(interval, .milliseconds(200)))
    }
    return condition()
}

/// The same, for a condition that must itself await (an HTTP request, a ledger query).
public func eventually(
    timeout: Duration = .seconds(60), interval: Duration = .milliseconds(10), _ condition: () async -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    var wait = interval
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: wait)
        wait = min(wait * 2, max(interval, .milliseconds(200)))
    }
    return await condition()
}
