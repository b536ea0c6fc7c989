/// Requests to a host past its connections (`maxConnectionsPerHost`), kept by the event loop in the order they
/// came until one of that host's transfers ends, instead of handed to libcurl at once.
///
/// Over HTTP/1.1 every request in flight holds a connection, so past the limit requests wait. In libcurl's own
/// pending list (7.88) a waiting request is taken up again as each connection frees, through its timers and a
/// search of the handle's connections: 10 to 15 µs more a request than one that never waited, measured with the
/// same rate of requests (`http-bench --in-flight 1000 --per-host 512` against `--in-flight 500 --per-host 0`). Here
/// a request waits in an array and starts when it can take a connection at once. A host that answered over HTTP/2
/// shares its connections among requests: nothing waits here for it, as libcurl multiplexes.
///
/// Used on the event loop's thread only.
struct HostQueue {
    /// A request waiting for one of its host's transfers to end, and when it began to wait (its timeout counts the
    /// wait: it is the whole exchange's).
    struct Waiting {
        let transfer: Transfer
        let since: ContinuousClock.Instant

        /// When its timeout, counted from when it began to wait, runs out.
        var deadline: ContinuousClock.Instant { since + transfer.request.timeout }
    }

    /// Connections allowed to one host at once (0: no limit) and the multi handles they are dealt over.
    private let limit: Int
    private let shards: Int
    /// The hosts seen (a few: Apple's two, the Server API's, a simulator's), each with its transfers in flight by
    /// multi handle, its waiting requests, and whether its last answer came over HTTP/2. Found by a prefix
    /// comparison of the URL, which costs less than hashing it.
    private var hosts: [Host] = []

    private struct Host {
        let prefix: String
        var loads: [Int]
        var waiting = FIFO<Waiting>()
        var multiplexed = false
    }

    init(limit: Int, shards: Int) {
        self.limit = limit
        self.shards = shards
    }

    /// The index of the host of `url` (`scheme://authority`, as written: what libcurl counts connections by); 0 for
    /// every URL when there is no limit.
    mutating func host(of url: String) -> Int {
        guard limit > 0 else { return 0 }
        for index in hosts.indices where url.utf8.starts(with: hosts[index].prefix.utf8) {
            let next = url.utf8.dropFirst(hosts[index].prefix.utf8.count).first
            if next.map({ $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? true {
                return index
            }
        }
        hosts.append(Host(prefix: String(Self.prefix(of: url)), loads: Array(repeating: 0, count: shards)))
        return hosts.count - 1
    }

    static func prefix(of url: String) -> Substring {
        guard let scheme = url.firstRange(of: "://") else { return url[...] }
        let end = url[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        return url[..<end]
    }

    /// Whether requests to `host` wait here past the limit: over HTTP/1.1, or before its first answer.
    private func isLimited(_ host: Int) -> Bool { limit > 0 && !hosts[host].multiplexed }

    /// Whether multi handle `shard` may take one more transfer to `host` now.
    func hasRoom(_ host: Int, on shard: Int) -> Bool {
        !isLimited(host) || hosts[host].loads[shard] < CurlMultiShard.share(limit, shard, shards)
    }

    private func hasRoom(_ host: Int) -> Bool {
        (0..<shards).contains { hasRoom(host, on: $0) }
    }

    /// Whether a request to `host` must wait: one waits already (they start in order), or no handle has room.
    func mustWait(_ host: Int) -> Bool {
        isLimited(host) && (!hosts[host].waiting.isEmpty || !hasRoom(host))
    }

    mutating func wait(_ transfer: Transfer, host: Int) {
        hosts[host].waiting.push(Waiting(transfer: transfer, since: .now))
    }

    mutating func started(_ host: Int, on shard: Int) {
        if limit > 0 { hosts[host].loads[shard] += 1 }
    }

    /// A transfer to `host` on `shard` ended; `httpVersion` is its answer's ("2" or "1.1"), nil when none came.
    mutating func ended(_ host: Int, on shard: Int, httpVersion: String?) {
        guard limit > 0 else { return }
        hosts[host].loads[shard] -= 1
        if let httpVersion { hosts[host].multiplexed = httpVersion == "2" }
    }

    /// The next waiting request that may start now, taken out, with its host: a host's first while it has room. The
    /// caller starts it (``started(_:on:)``) before asking again.
    mutating func next() -> (Waiting, host: Int)? {
        for host in hosts.indices where !hosts[host].waiting.isEmpty && hasRoom(host) {
            if let first = hosts[host].waiting.pop() { return (first, host) }
        }
        return nil
    }

    /// The first waiting requests whose timeout passed while they waited, or whose caller was answered (cancelled),
    /// taken out. Each host's are looked at from the first: one behind them goes when it is first (a client gives
    /// one host the same timeout; a cancelled one is answered already, and only its room waits).
    mutating func expired(at now: ContinuousClock.Instant) -> [Waiting] {
        var gone: [Waiting] = []
        for host in hosts.indices {
            while let first = hosts[host].waiting.first,
                first.deadline <= now || first.transfer.isFinished
            {
                _ = hosts[host].waiting.pop()
                gone.append(first)
            }
        }
        return gone
    }

    /// When the first waiting request of any host runs out of time: the loop wakes for it.
    var nextDeadline: ContinuousClock.Instant? {
        var earliest: ContinuousClock.Instant?
        for host in hosts.indices {
            guard let deadline = hosts[host].waiting.first?.deadline else { continue }
            if earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        return earliest
    }

    /// Every waiting request, taken out (the client shuts down).
    mutating func drain() -> [Waiting] {
        var all: [Waiting] = []
        for host in hosts.indices {
            while let next = hosts[host].waiting.pop() { all.append(next) }
        }
        return all
    }
}

/// A first-in, first-out queue: pushed onto one array, popped from another holding them in reverse, each element
/// moved once.
struct FIFO<Element> {
    private var pushed: [Element] = []
    private var popping: [Element] = []

    var isEmpty: Bool { pushed.isEmpty && popping.isEmpty }

    var first: Element? { popping.last ?? pushed.first }

    mutating func push(_ element: Element) { pushed.append(element) }

    mutating func pop() -> Element? {
        if popping.isEmpty {
            swap(&pushed, &popping)
            popping.reverse()
        }
        return popping.popLast()
    }
}
