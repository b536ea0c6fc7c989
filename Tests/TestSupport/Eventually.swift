/// Waits for `condition` to hold, checking it every `interval`, until `timeout`. Returns whether it held.
/// For conditions that have no event to await; never a fixed sleep-and-hope.
public func eventually(
    timeout: Duration = .seconds(30), interval: Duration = .milliseconds(10), _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return condition()
}

/// The same, for a condition that must itself await (an HTTP request, a ledger query).
public func eventually(
    timeout: Duration = .seconds(30), interval: Duration = .milliseconds(10), _ condition: () async -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return await condition()
}
