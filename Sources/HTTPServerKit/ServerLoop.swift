import CLinux
import Foundation
import Synchronization

/// One epoll event loop with its own listening socket.
///
/// `@unchecked Sendable`: connections and timers are touched only on the loop's thread; `stop` only flips
/// an atomic and writes to an eventfd.
final class ServerLoop: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let epoll: Int32
    private let wakeup: Int32
    private let handler: @Sendable (ServerRequest) -> ServerReply
    private let stopping = Atomic<Bool>(false)
    private var connections: [Int32: Connection] = [:]
    private var timers = TimerHeap()
    /// Connections with parsed-but-unanswered requests left over when their turn's budget ran out.
    private var backlog: [Connection] = []
    /// Requests one connection may have answered per turn of the loop, so a pipelining client cannot keep the
    /// loop from every other connection.
    private static let requestsPerTurn = 64

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
        watch(listener, events: EPOLLIN.rawValue)
        watch(wakeup, events: EPOLLIN.rawValue)
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

    private func watch(_ fd: Int32, events: UInt32, modify: Bool = false) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epoll, modify ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event)
    }

    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !stopping.load(ordering: .acquiring) {
            let timeout = backlog.isEmpty ? (timers.millisecondsUntilNext(now: .now) ?? 1000) : 0
            let count = epoll_wait(epoll, &events, Int32(events.count), Int32(clamping: timeout))
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                let flags = events[index].events
                if fd == listener {
                    acceptAll()
                } else if fd == wakeup {
                    var value: UInt64 = 0
                    _ = read(wakeup, &value, 8)
                } else if let connection = connections[fd] {
                    if flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
                        close(connection)
                        continue
                    }
                    if flags & EPOLLOUT.rawValue != 0 { flush(connection) }
                    if flags & EPOLLIN.rawValue != 0 { readAvailable(connection) }
                }
            }
            fireTimers()
            let turn = backlog
            backlog = []
            for connection in turn {
                connection.inBacklog = false
                serveNext(connection)
            }
        }
        for connection in Array(connections.values) { close(connection) }
        Glibc.close(listener)
        Glibc.close(epoll)
    }

    private func acceptAll() {
        while true {
            let fd = clinux_accept_cloexec_nonblock(listener)
            guard fd >= 0 else { return }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            connections[fd] = Connection(fd: fd)
            watch(fd, events: EPOLLIN.rawValue)
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
        watch(connection.fd, events: events, modify: true)
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
