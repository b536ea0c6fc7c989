/// What one client, or all of them together, may cost a `MicroHTTPServer`.
///
/// Every limit is enforced by libmicrohttpd except `maximumBodyBytes`, which the server counts itself while the
/// upload arrives. `maximumConnectionsPerIP` 0 means no per-address limit (libmicrohttpd's convention); the others
/// must be positive. Tune by changing the fields of `HTTPServerLimits()`.
public struct HTTPServerLimits: Sendable, Equatable {
    /// Connections held open at once, idle ones included; beyond it new connections are closed on accept.
    /// Default: 1024, which a scraper, a probe and a load balancer's keep-alive pool stay far below, while it
    /// keeps a flood of connections from taking every file descriptor of a process whose soft limit is the
    /// usual 1024-or-more.
    public var maximumConnections: Int = 1024

    /// Connections from one IP address at once. Default: 64. Behind a load balancer every request comes from
    /// its few addresses, so raise it there; on the open internet it keeps one client from holding them all.
    public var maximumConnectionsPerIP: Int = 64

    /// Seconds a connection may stay silent (idle keep-alive, or a request trickling in) before it is closed, and
    /// the longest a request's headers may take, from the connection's opening or its last answer (a byte inside
    /// each idle timeout does not hold a connection longer). Default: 10 s: longer than any keep-alive gap a
    /// scraper or Apple leaves, short enough that slow clients cannot pile up.
    public var idleTimeoutSeconds: Int = 10

    /// Seconds a request's body may take to arrive, from its headers: past them the connection is closed at its
    /// next piece. Without it a client trickling a byte inside each idle timeout holds its connection, and the
    /// body buffered so far, for as long as it likes. Default: 30 s (an App Store notification is a few KiB).
    public var bodyTimeoutSeconds: Int = 30

    /// Bytes of memory per connection: the request line and headers must fit in it, with the read buffer.
    /// A request whose headers do not fit is answered 431 (or 414 for the URL) and the connection closed.
    /// Default: 64 KiB, twice the largest header block a proxy usually forwards.
    public var connectionMemoryBytes: Int = 64 * 1024

    /// Bytes of request body. A Content-Length above it is answered 413 before the body is read; a chunked
    /// body that grows past it is discarded as it arrives and answered 413. Default: 1 MiB; an App Store
    /// notification is a few KiB of signed JSON.
    public var maximumBodyBytes: Int = 1024 * 1024

    public init() {}

    /// What one connection may hold at its worst: its headers' room full and a whole body buffered. A client that
    /// trickles a byte inside each idle timeout keeps both, for as long as it likes.
    public var worstBytesPerConnection: Int { connectionMemoryBytes + maximumBodyBytes }

    /// Lowers ``maximumConnections`` to what `bytes` of memory hold with every connection at its worst (never below
    /// 64), and the per-address bound with it: a descriptor budget of a million would otherwise let a flood of
    /// trickling connections hold gigabytes, before any request is authenticated.
    public mutating func capConnections(atMemory bytes: Int) {
        maximumConnections = min(maximumConnections, max(64, bytes / max(1, worstBytesPerConnection)))
        maximumConnectionsPerIP = min(maximumConnectionsPerIP, maximumConnections)
    }

    /// A port the world reaches through an ingress (the receiver's, the desk's): half the process's descriptor
    /// `budget` in connections, no more than 64 MiB hold with each at its worst, and a quarter of them per client
    /// address, 64 at least (behind an ingress every request comes from its few addresses, so the bound is wide,
    /// but one client still cannot hold every connection).
    public static func publicPort(maximumBodyBytes: Int, descriptors budget: Int) -> HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.maximumBodyBytes = maximumBodyBytes
        limits.maximumConnections = DescriptorBudget.connections(share: 0.5, of: budget)
        limits.capConnections(atMemory: 64 * 1_024 * 1_024)
        limits.maximumConnectionsPerIP = min(limits.maximumConnections, max(64, limits.maximumConnections / 4))
        return limits
    }

    /// Checks each limit once, so a bad one fails where the server is built, naming the limit.
    func validated() throws -> HTTPServerLimits {
        func require(_ holds: Bool, _ name: String, _ value: Int) throws {
            guard holds else { throw ServerError(reason: "limits.\(name): \(value) is out of range") }
        }
        try require((1...Int(Int32.max)).contains(maximumConnections), "maximumConnections", maximumConnections)
        try require(
            (0...Int(Int32.max)).contains(maximumConnectionsPerIP), "maximumConnectionsPerIP", maximumConnectionsPerIP)
        try require((1...86_400).contains(idleTimeoutSeconds), "idleTimeoutSeconds", idleTimeoutSeconds)
        try require((1...86_400).contains(bodyTimeoutSeconds), "bodyTimeoutSeconds", bodyTimeoutSeconds)
        try require(connectionMemoryBytes >= 4096, "connectionMemoryBytes", connectionMemoryBytes)
        try require(maximumBodyBytes >= 0, "maximumBodyBytes", maximumBodyBytes)
        return self
    }
}
