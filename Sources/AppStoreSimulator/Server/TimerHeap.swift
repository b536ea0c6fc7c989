/// A binary min-heap of timed actions.
struct TimerHeap {
    private var items: [(deadline: ContinuousClock.Instant, sequence: Int, action: () -> Void)] = []
    private var sequence = 0

    mutating func push(at deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) {
        sequence += 1
        items.append((deadline, sequence, action))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard earlier(child, parent) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popDue(now: ContinuousClock.Instant) -> (() -> Void)? {
        guard let first = items.first, first.deadline <= now else { return nil }
        items.swapAt(0, items.count - 1)
        let due = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count && earlier(left, smallest) { smallest = left }
            if right < items.count && earlier(right, smallest) { smallest = right }
            guard smallest != parent else { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        _ = first
        return due.action
    }

    func millisecondsUntilNext(now: ContinuousClock.Instant) -> Int? {
        guard let first = items.first else { return nil }
        let wait = first.deadline - now
        guard wait > .zero else { return 0 }
        let (seconds, attoseconds) = wait.components
        return Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000) + 1
    }

    private func earlier(_ a: Int, _ b: Int) -> Bool {
        items[a].deadline < items[b].deadline
            || (items[a].deadline == items[b].deadline && items[a].sequence < items[b].sequence)
    }
}
