import CLinux
import Foundation
import HTTPServerKit
import Synchronization

/// One epoll event loop with its own listening socket. What any thread may touch is here (the descriptors, the
/// stop flag); the connections and timers live in a ``LoopConnections`` that `run` makes on the loop's own thread
/// and never hands on.
final class ServerLoop: Sendable {
    let port: UInt16
    private let listener: Int32
    private let epoll: Int32
    private let wakeup: Int32
    private let handler: @Sendable (ServerRequest) -> ServerReply
    private let stopping = Atomic<Bool>(false)

    init(host: String, port: UInt16, handler: @escaping @Sendable (ServerRequest) -> ServerReply) throws {
        self.handler = handler
        // Close-on-exec, like every descriptor here: a process this one starts (a test's PostgreSQL, say) must not
        // inherit thousands of client sockets (it counted them against its own limit and refused to start).
        let listener = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw ServerError("socket") }
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw ServerError("address \(host)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound, listen(listener, 4096) == 0 else { throw ServerError("bind/listen \(host):\(port)") }
        self.port = UInt16(bigEndian: address.sin_port)
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeup = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        watch(epoll, listener, events: EPOLLIN.rawValue)
        watch(epoll, wakeup, events: EPOLLIN.rawValue)
    }

    /// Idempotent. The eventfd it writes to stays open until deinit: a second stop (a test's, then its
    /// harness's) once wrote 8 bytes into whatever descriptor had reused the closed number, another server's
    /// client connection, which read them as its answer.
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var value: UInt64 = 1
        _ = write(wakeup, &value, 8)
    }

    deinit { Glibc.close(wakeup) }

    func run() {
        let connections = LoopConnections(listener: listener, epoll: epoll, handler: handler)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !stopping.load(ordering: .acquiring) {
            let count = epoll_wait(epoll, &events, Int32(events.count), Int32(clamping: connections.timeout))
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                if fd == listener {
                    connections.acceptAll()
                } else if fd == wakeup {
                    var value: UInt64 = 0
                    _ = read(wakeup, &value, 8)
                } else {
                    connections.ready(fd, events: events[index].events)
                }
            }
            connections.endTurn()
        }
        connections.closeAll()
        Glibc.close(listener)
        Glibc.close(epoll)
    }
}

func watch(_ epoll: Int32, _ fd: Int32, events: UInt32, modify: Bool = false) {
    var event = epoll_event()
    event.events = events
    event.data.fd = fd
    epoll_ctl(epoll, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event)
}
