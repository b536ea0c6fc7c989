/// Tracks one partition's jobs in flight, which finish out of order, and says which offset may be
/// committed: never past a job that is not finished.
public struct PartitionOffsets: Sendable {
    private var offsets: [Int64] = []
    private var finished: [Bool] = []
    private var head = 0
    private var highestSeen: Int64 = -1
    /// Jobs left unanswered for the next delivery (the worker stopped first): never finished, so never
    /// committed past, but nothing to wait for either.
    private var abandoned: Set<Int64> = []
    /// The consumer's position, when it moved past records it never hands over (transaction markers).
    private var position: Int64 = -1

    public init() {}

    /// Jobs taken, not finished and not abandoned: what a drain waits for.
    public var outstanding: Int { finished[head...].lazy.filter { !$0 }.count - abandoned.count }

    /// Records a job taken from the partition. False for an offset at or below one already taken: the
    /// consumer can deliver a message again (seen after pause and resume), and that job is already in
    /// flight or finished here.
    @discardableResult
    public mutating func start(_ offset: Int64) -> Bool {
        guard offset > highestSeen else { return false }
        offsets.append(offset)
        finished.append(false)
        highestSeen = offset
        return true
    }

    /// Marks a job left unanswered (the worker is stopping): the commit never passes it, so the job is
    /// delivered again; a drain no longer waits for it. False when it was not in flight here.
    @discardableResult
    public mutating func abandon(_ offset: Int64) -> Bool {
        guard let index = index(of: offset), !finished[index], !abandoned.contains(offset) else { return false }
        abandoned.insert(offset)
        return true
    }

    /// Marks a job finished (its result acknowledged by the broker). False when it was not in flight here.
    @discardableResult
    public mutating func finish(_ offset: Int64) -> Bool {
        guard let index = index(of: offset), !finished[index], !abandoned.contains(offset) else { return false }
        finished[index] = true
        while head < finished.count && finished[head] { head += 1 }
        if head > 1024 && head * 2 > offsets.count {  // drop the finished prefix now and then
            offsets.removeFirst(head)
            finished.removeFirst(head)
            head = 0
        }
        return true
    }

    private func index(of offset: Int64) -> Int? {
        // Offsets are taken in increasing order: a binary search finds one among thousands in flight.
        var (low, high) = (head, offsets.count)
        while low < high {
            let middle = (low + high) / 2
            if offsets[middle] < offset { low = middle + 1 } else { high = middle }
        }
        return low < offsets.count && offsets[low] == offset ? low : nil
    }

    /// Records the consumer's position: every message before it was taken here (``start(_:)``), so when
    /// all of them are finished the commit may go as far, past the commit and abort markers of transactional
    /// producers, which are never handed over and would otherwise look like one unread job for ever.
    public mutating func advance(toPosition offset: Int64) {
        position = max(position, offset)
    }

    /// The offset to commit (the next to read): the oldest unfinished job's, or, when all are finished, one
    /// past the last seen or the consumer's position if that is further. Nil before anything was seen.
    public var committable: Int64? {
        if head < offsets.count { return offsets[head] }
        let next = max(highestSeen + 1, position)
        return next > 0 ? next : nil
    }
}
