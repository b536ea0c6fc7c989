import CLinux
import Foundation
import HTTPServerKit

/// The connections and timers of one ``ServerLoop``: made by the loop on its thread, used there only (not
/// Sendable, so the compiler keeps it there).
final class LoopConnections {
    private let listener: Int32
    private let epoll: Int32
    private let handler: @Sendable (ServerRequest) -> ServerReply
    private var connections: [Int32: Connection] = [:]
    private var timers = TimerHeap()
    /// Connections with parsed-but-unanswered requests left over when their turn's budget ran out.
    private var backlog: [Connection] = []
    /// Requests one connection may have answered per turn of the loop, so a pipelining client cannot keep the
    /// loop from every other connection.
    private static let requestsPerTurn = 64

    init(listener: Int32, epoll: Int32, handler: @escaping @Sendable (ServerRequest) -> ServerReply) {
        self.listener = listener
        self.epoll = epoll
        self.handler = handler
    }

    /// How long the loop may wait for events: until the next timer, or not at all while a backlog waits.
    var timeout: Int { backlog.isEmpty ? (timers.millisecondsUntilNext(now: .now) ?? 1000) : 0 }

    /// A client socket's events.
    func ready(_ fd: Int32, events flags: UInt32) {
        guard let connection = connections[fd] else { return }
        if flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { return close(connection) }
        if flags & EPOLLOUT.rawValue != 0 { flush(connection) }
        if flags & EPOLLIN.rawValue != 0 { readAvailable(connection) }
    }

    /// After a turn's events: the due timers, then the backlog.
    func endTurn() {
        fireTimers()
        let turn = backlog
        backlog = []
        for connection in turn {
            connection.inBacklog = false
            serveNext(connection)
        }
    }

    func closeAll() {
        for connection in Array(connections.values) { close(connection) }
    }

    func acceptAll() {
        while true {
            let fd = clinux_accept_cloexec_nonblock(listener)
            guard fd >= 0 else { return }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            connections[fd] = Connection(fd: fd)
            watch(epoll, fd, events: EPOLLIN.rawValue)
        }
    }

    /// Unanswered input one connection may hold: one request of the largest size, plus a read's worth. Past it,
    /// the connection is not read until requests are answered, so a pipelining client is held back by TCP.
    private static let maximumPendingInput =
        HTTPRequestParser.maximumHeaderBytes + HTTPRequestParser.maximumBodyBytes + 16_384

    private func readAvailable(_ connection: Connection) {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while connection.pendingInput < Self.maximumPendingInput {
            let received = read(connection.fd, &chunk, chunk.count)
            if received > 0 {
                connection.input.append(contentsOf: chunk[..<received])
                continue
            }
            if received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                return close(connection)
            }
            break
        }
        if connection.pendingInput >= Self.maximumPendingInput {
            connection.readPaused = true
            updateInterest(connection)
        }
        serveNext(connection)
    }

    /// Answers the complete requests in the input one after another, until one is answered later (a delayed
    /// reply), the output backs up, the input runs out, or `requestsPerTurn` were answered. A loop, not
    /// recursion: a pipeline of any length runs in constant stack. What stops it restarts it: the delayed reply's
    /// timer, `flush` once the output drains, or the next turn for the backlog.
    private func serveNext(_ connection: Connection) {
        var answered = 0
        serving: while connection.isOpen && !connection.busy && !connection.waitingToWrite {
            guard answered < Self.requestsPerTurn else {
                if !connection.inBacklog {
                    connection.inBacklog = true
                    backlog.append(connection)
                }
                break serving
            }
            answered += 1
            switch HTTPRequestParser.parse(connection.input, from: connection.consumed, scanned: &connection.scanned) {
            case .incomplete:
                break serving
            case .invalid:
                send(connection, status: 400, headers: [], body: Data("bad request".utf8), closeAfter: true)
                return
            case .request(let request, let keepAlive, let end):
                connection.consumed = end
                connection.scanned = end
                connection.busy = true
                connection.keepAlive = keepAlive
                switch handler(request) {
                case .respond(let status, let headers, let body, let delay):
                    if delay <= .zero {
                        send(connection, status: status, headers: headers, body: body, closeAfter: !keepAlive)
                    } else {
                        timers.push(at: .now + delay) { [self] in
                            send(connection, status: status, headers: headers, body: body, closeAfter: !keepAlive)
                            serveNext(connection)
                        }
                    }
                case .drop(let delay):
                    if delay <= .zero {
                        close(connection)
                    } else {
                        timers.push(at: .now + delay) { [self] in close(connection) }
                    }
                }
            }
        }
        guard connection.isOpen else { return }
        connection.compactInput()
        if connection.readPaused && connection.pendingInput < Self.maximumPendingInput {
            connection.readPaused = false
            updateInterest(connection)
        }
    }

    private func send(_ connection: Connection, status: Int, headers: [(String, String)], body: Data, closeAfter: Bool)
    {
        guard connection.isOpen else { return }
        var head = "HTTP/1.1 \(status) \(HTTPStatusText.text(status))\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if closeAfter { head += "Connection: close\r\n" }
        head += "\r\n"
        connection.output.append(contentsOf: head.utf8)
        connection.output.append(contentsOf: body)
        connection.closeAfterWrite = closeAfter
        connection.busy = false
        flush(connection)
    }

    private func flush(_ connection: Connection) {
        while connection.written < connection.output.count {
            // send with MSG_NOSIGNAL, not write: a client gone before its answer must cost an EPIPE, not a
            // SIGPIPE that ends the whole process (the simulator runs inside the test process).
            let sent = connection.output.withUnsafeBytes { bytes in
                Glibc.send(
                    connection.fd, bytes.baseAddress! + connection.written, bytes.count - connection.written,
                    Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                connection.written += sent
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                if !connection.waitingToWrite {
                    connection.waitingToWrite = true
                    updateInterest(connection)
                }
                return
            } else {
                return close(connection)
            }
        }
        connection.output.removeAll(keepingCapacity: true)
        connection.written = 0
        if connection.closeAfterWrite { return close(connection) }
        if connection.waitingToWrite {
            // The output backed up and has drained: answer what was held back (serveNext stopped for it).
            connection.waitingToWrite = false
            updateInterest(connection)
            serveNext(connection)
        }
    }

    /// Read while there is room for input, write while output is waiting.
    private func updateInterest(_ connection: Connection) {
        var events: UInt32 = 0
        if !connection.readPaused { events |= EPOLLIN.rawValue }
        if connection.waitingToWrite { events |= EPOLLOUT.rawValue }
        watch(epoll, connection.fd, events: events, modify: true)
    }

    private func close(_ connection: Connection) {
        guard connection.isOpen else { return }
        connection.isOpen = false
        connections[connection.fd] = nil
        epoll_ctl(epoll, EPOLL_CTL_DEL, connection.fd, nil)
        Glibc.close(connection.fd)
    }

    private func fireTimers() {
        let now = ContinuousClock.now
        while let action = timers.popDue(now: now) { action() }
    }
}

/// One client connection's buffers and state.
final class Connection {
    let fd: Int32
    var input: [UInt8] = []
    /// Input before this index has been parsed into requests.
    var consumed = 0
    /// Where the search for the next request's header end resumes.
    var scanned = 0
    var readPaused = false
    var inBacklog = false
    var output: [UInt8] = []
    var written = 0
    var busy = false
    var keepAlive = true
    var closeAfterWrite = false
    var waitingToWrite = false
    var isOpen = true

    init(fd: Int32) { self.fd = fd }

    var pendingInput: Int { input.count - consumed }

    /// Drops parsed input once it is at least half the buffer, so each byte is moved O(1) times on average.
    func compactInput() {
        guard consumed > 0, consumed * 2 >= input.count else { return }
        input.removeFirst(consumed)
        scanned -= consumed
        consumed = 0
    }
}
