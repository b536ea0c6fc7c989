import Glibc
import Foundation

/// A loopback port free at the moment of asking (the kernel's pick for a socket bound to port 0). Another
/// process may take it before the caller binds it: callers that start a server on it retry on a fresh one.
public func freeLoopbackPort() throws -> UInt16 {
    guard let port = bindLoopback(0) else { throw TestSupportError("no free loopback port") }
    return port
}

/// A loopback port free at the moment of asking, below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`), so no outgoing connection's local port can take it before a server
/// binds it: for servers whose port must be known before they start (a certificate names it). Only another caller
/// of this function could pick the same one; it is drawn at random from thousands, and checked free.
public func freePortBelowEphemeralRange() throws -> UInt16 {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let low = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
    let candidates = 10_000..<max(10_001, low)
    for _ in 0..<100 {
        let port = UInt16(Int.random(in: candidates))
        if bindLoopback(port) != nil { return port }
    }
    throw TestSupportError("no free loopback port below \(low)")
}

/// Binds a socket to `port` on loopback (0: the kernel picks), then closes it: the port bound, or nil.
private func bindLoopback(_ port: UInt16) -> UInt16? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    return bound ? UInt16(bigEndian: address.sin_port) : nil
}
