import CEpoll
import Foundation
import Synchronization

/// The least an HTTP/1.1 client on epoll does for a request: one cleartext host, kept connections, a request's
/// bytes written with one `send`, an answer read until its `Content-Length` is in, on one thread with the same
/// submit-and-wake handover as the worker's libcurl loop. No TLS, proxy, redirect, chunked body or timeout: it
/// carries no traffic of the product's. It measures how much of a request's CPU is libcurl's own work and how
/// much the kernel's (`http-bench --client raw`), the figure that says what a client of the worker's own could
/// save.
final class RawHTTP1Client: @unchecked Sendable {
    struct Answer {
        var status: Int
        var body: [UInt8]
    }

    struct Failure: Error { var reason: String }

    private struct Pending {
        var bytes: [UInt8]
        var continuation: CheckedContinuation<Answer, any Error>
    }

    /// A socket and what it is doing; touched by the loop thread only.
    private final class Connection {
        let fd: Int32
        var connected = false
        var outgoing: [UInt8] = []
        var written = 0
        var incoming: [UInt8] = []
        var continuation: CheckedContinuation<Answer, any Error>?

        init(fd: Int32) {
            self.fd = fd
            incoming.reserveCapacity(4096)
        }
    }

    private let address: sockaddr_in
    private let host: String
    private let path: String
    private let inbox = Mutex<[Pending]>([])
    private let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    private let wakeup = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    private var connections: [Int32: Connection] = [:]
    private var idle: [Connection] = []

    /// `url`: `http://IPv4:PORT/path`.
    init(url: String) throws {
        guard let parsed = URL(string: url), parsed.scheme == "http", let host = parsed.host, let port = parsed.port
        else { throw Failure(reason: "not an http://IPv4:PORT/path URL: \(url)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure(reason: "not IPv4: \(host)") }
        self.address = address
        self.host = "\(host):\(port)"
        self.path = parsed.path.isEmpty ? "/" : parsed.path
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeup
        epoll_ctl(epoll, EPOLL_CTL_ADD, wakeup, &event)
        let thread = Thread { [self] in run() }
        thread.name = "http-raw"
        thread.start()
    }

    /// POSTs `body` as JSON and returns the answer.
    func post(_ body: [UInt8]) async throws -> Answer {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(body.count + 160)
        bytes.append(
            contentsOf:
                "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                .utf8)
        bytes.append(contentsOf: body)
        return try await withCheckedThrowingContinuation { continuation in
            let first = inbox.withLock { pending in
                pending.append(Pending(bytes: bytes, continuation: continuation))
                return pending.count == 1
            }
            if first {
                var one: UInt64 = 1
                _ = write(wakeup, &one, 8)
            }
        }
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let submitted = inbox.withLock { pending in
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            for pending in submitted { start(pending) }
            let count = epoll_wait(epoll, &events, Int32(events.count), -1)
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                if fd == wakeup {
                    var value: UInt64 = 0
                    _ = read(wakeup, &value, 8)
                    continue
                }
                guard let connection = connections[fd] else { continue }
                let ready = events[index].events
                if ready & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
                    close(connection, Failure(reason: "the connection failed"))
                    continue
                }
                if ready & EPOLLOUT.rawValue != 0, !connection.connected {
                    connection.connected = true
                    send(connection)
                }
                if ready & EPOLLIN.rawValue != 0 { receive(connection) }
            }
        }
    }

    private func start(_ pending: Pending) {
        let connection: Connection
        if let kept = idle.popLast() {
            connection = kept
        } else {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            var noDelay: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            var address = self.address
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard result == 0 || errno == EINPROGRESS else {
                Glibc.close(fd)
                return pending.continuation.resume(throwing: Failure(reason: "connect: errno \(errno)"))
            }
            connection = Connection(fd: fd)
            connection.connected = result == 0
            // Edge-triggered, in and out: registered once for the connection's life, no `epoll_ctl` a request.
            var event = epoll_event()
            event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
            event.data.fd = fd
            epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
            connections[fd] = connection
        }
        connection.outgoing = pending.bytes
        connection.written = 0
        connection.incoming.removeAll(keepingCapacity: true)
        connection.continuation = pending.continuation
        if connection.connected { send(connection) }
    }

    private func send(_ connection: Connection) {
        while connection.written < connection.outgoing.count {
            let sent = connection.outgoing.withUnsafeBytes {
                Glibc.send(
                    connection.fd, $0.baseAddress! + connection.written, $0.count - connection.written,
                    Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                connection.written += sent
            } else if sent < 0, errno == EAGAIN {
                return  // the next EPOLLOUT edge goes on
            } else {
                return close(connection, Failure(reason: "send: errno \(errno)"))
            }
        }
    }

    private func receive(_ connection: Connection) {
        let chunk = 16_384
        while true {
            let count = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: chunk) { scratch in
                let count = recv(connection.fd, scratch.baseAddress, chunk, 0)
                if count > 0 { connection.incoming.append(contentsOf: scratch[0..<count]) }
                return count
            }
            if count == 0 { return close(connection, Failure(reason: "the server closed the connection")) }
            if count < 0 {
                if errno != EAGAIN { close(connection, Failure(reason: "recv: errno \(errno)")) }
                return
            }
            if let answer = Self.answer(in: connection.incoming) {
                let continuation = connection.continuation
                connection.continuation = nil
                idle.append(connection)
                continuation?.resume(returning: answer)
                return
            }
        }
    }

    /// The answer once its head and its `Content-Length` bytes are in; nil while they are not.
    private static func answer(in bytes: [UInt8]) -> Answer? {
        bytes.withUnsafeBufferPointer { bytes -> Answer? in
            guard bytes.count >= 16 else { return nil }
            var headEnd = -1
            var index = 0
            while index + 3 < bytes.count {
                if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                    headEnd = index + 4
                    break
                }
                index += 1
            }
            guard headEnd > 0 else { return nil }
            let status = (Int(bytes[9]) - 48) * 100 + (Int(bytes[10]) - 48) * 10 + (Int(bytes[11]) - 48)
            var length = 0
            let name = Array("content-length:".utf8)
            var line = 0
            while line < headEnd {
                var matches = line + name.count < headEnd
                var offset = 0
                while matches, offset < name.count {
                    let byte = bytes[line + offset]
                    matches = (byte >= 65 && byte <= 90 ? byte + 32 : byte) == name[offset]
                    offset += 1
                }
                if matches {
                    var digit = line + name.count
                    while bytes[digit] == 32 { digit += 1 }
                    while bytes[digit] >= 48, bytes[digit] <= 57 {
                        length = length * 10 + Int(bytes[digit] - 48)
                        digit += 1
                    }
                }
                while line < headEnd, bytes[line] != 10 { line += 1 }
                line += 1
            }
            guard bytes.count >= headEnd + length else { return nil }
            return Answer(status: status, body: Array(bytes[headEnd..<(headEnd + length)]))
        }
    }

    private func close(_ connection: Connection, _ failure: Failure) {
        connections[connection.fd] = nil
        idle.removeAll { $0 === connection }
        Glibc.close(connection.fd)
        connection.continuation?.resume(throwing: failure)
        connection.continuation = nil
    }
}
