import CLinux
import CMicroHTTPD
import Foundation
import Synchronization

/// Owns one libmicrohttpd daemon and runs its event loop.
///
/// MHD runs in its external-epoll mode: `run()`, on the thread `MicroHTTPServer.start` creates, waits on MHD's
/// epoll descriptor and on an eventfd (written to stop, and after each resumed connection), and calls `MHD_run`.
/// MHD's own polling thread would start serving inside `MHD_start_daemon`; this way everything that can fail
/// (the address, bind, epoll, the eventfd) fails in `init`, `start` cannot fail, and stopping drains suspended
/// connections on the thread that runs MHD.
final class MicroHTTPDaemon: Sendable {
    let port: UInt16
    private let daemon: DaemonPointer
    private let epoll: Int32
    private let wakeup: Int32
    private let dispatcher: MicroHTTPDispatcher
    private let stopping = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)

    /// Binds `host:port` (IPv4; "" or "0.0.0.0" is every interface; port 0 lets the kernel pick) and sets the
    /// daemon up without serving yet: connections wait in the listen backlog until `run()`.
    init(
        host: String, port: UInt16, limits: HTTPServerLimits,
        handler: @escaping @Sendable (ServerRequest) async -> ServerReply
    ) throws {
        let wakeup = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeup >= 0 else { throw ServerError("eventfd") }
        let dispatcher = MicroHTTPDispatcher(limits: limits, wakeup: wakeup, handler: handler)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        if host.isEmpty || host == "0.0.0.0" {
            address.sin_addr.s_addr = INADDR_ANY
        } else {
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
                close(wakeup)
                throw ServerError(reason: "\(host) is not an IPv4 address")
            }
        }
        let context = Unmanaged.passUnretained(dispatcher).toOpaque()
        // No MHD_USE_ERROR_LOG: MHD would print to standard error, which carries the worker's JSON log lines.
        let flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        let started = withUnsafeMutablePointer(to: &address) { address in
            var options = [
                MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(address)),
                MHD_OptionItem(option: .CONNECTION_LIMIT, value: limits.maximumConnections, ptr_value: nil),
                MHD_OptionItem(
                    option: .PER_IP_CONNECTION_LIMIT, value: limits.maximumConnectionsPerIP, ptr_value: nil),
                MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: limits.idleTimeoutSeconds, ptr_value: nil),
                MHD_OptionItem(
                    option: .CONNECTION_MEMORY_LIMIT, value: limits.connectionMemoryBytes, ptr_value: nil),
                MHD_OptionItem(option: .END, value: 0, ptr_value: nil),
            ]
            return options.withUnsafeMutableBufferPointer { options in
                cmhd_start_daemon(
                    UInt32(flags),
                    { context, connection, url, method, _, upload, uploadSize, slot in
                        guard let context, let connection, let uploadSize, let slot else { return .NO }
                        let dispatcher = Unmanaged<MicroHTTPDispatcher>.fromOpaque(context).takeUnretainedValue()
                        return dispatcher.access(
                            connection: connection, url: url, method: method,
                            upload: upload.map { UnsafeRawBufferPointer(start: $0, count: uploadSize.pointee) },
                            unread: uploadSize, slot: slot)
                    }, context,
                    { context, connection, slot, _ in
                        guard let context, let slot else { return }
                        Unmanaged<MicroHTTPDispatcher>.fromOpaque(context).takeUnretainedValue()
                            .completed(connection: connection, slot: slot)
                    }, context,
                    { context, connection, _, event in
                        guard let context, let connection else { return }
                        Unmanaged<MicroHTTPDispatcher>.fromOpaque(context).takeUnretainedValue()
                            .connection(connection, opened: event == .CONNECTION_NOTIFY_STARTED)
                    }, context, options.baseAddress)
            }
        }
        guard let started else {
            let failure = ServerError("listen on \(host):\(port)")
            close(wakeup)
            throw failure
        }
        let boundPort = cmhd_daemon_port(started)
        let epoll = cmhd_daemon_epoll_fd(started)
        guard boundPort != 0, epoll >= 0 else {
            MHD_stop_daemon(started)
            close(wakeup)
            throw ServerError(reason: "libmicrohttpd gave no port or epoll descriptor for \(host):\(port)")
        }
        self.dispatcher = dispatcher
        daemon = DaemonPointer(raw: started)
        self.port = boundPort
        self.epoll = epoll
        self.wakeup = wakeup
    }

    deinit {
        shutDown()
        close(wakeup)
    }

    /// Serves until `requestStop`, then shuts the daemon down. Blocks: runs on its own thread.
    func run() {
        var descriptors = [
            pollfd(fd: epoll, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0),
        ]
        var swept = ContinuousClock.now
        while !stopping.load(ordering: .acquiring) {
            _ = poll(&descriptors, nfds_t(descriptors.count), nextTimeoutMilliseconds())
            if descriptors[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeup, &count, MemoryLayout<UInt64>.size)
            }
            _ = MHD_run(daemon.raw)
            if ContinuousClock.now - swept >= .seconds(1) {
                swept = ContinuousClock.now
                closeConnectionsOverdue()
            }
        }
        shutDown()
    }

    /// Closes each connection whose request has not finished its headers within the idle timeout of the connection's
    /// opening or its last answer. MHD's idle timeout starts again at every byte: a client sending a header byte
    /// inside each would hold its connection, and its room, for days. Run on the loop's thread, between two
    /// `MHD_run`s, so MHD has not closed the socket: the shutdown makes the next `MHD_run` close the connection.
    private func closeConnectionsOverdue() {
        for connection in dispatcher.takeOverdueHeaders(after: .seconds(dispatcher.limits.idleTimeoutSeconds)) {
            let fd = cmhd_connection_fd(connection)
            if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Makes `run()` return soon, from any thread.
    func requestStop() {
        stopping.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
    }

    /// Answers every suspended connection 503, lets MHD send those answers, then stops the daemon, which
    /// closes the listening socket and every connection. Idempotent; never concurrent with `run()`'s loop.
    func shutDown() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        dispatcher.beginStopping()
        let deadline = ContinuousClock.now + .seconds(5)
        var descriptor = pollfd(fd: epoll, events: Int16(POLLIN), revents: 0)
        while dispatcher.hasSuspendedConnections && ContinuousClock.now < deadline {
            _ = poll(&descriptor, 1, 10)
            _ = MHD_run(daemon.raw)
        }
        // MHD_stop_daemon aborts the process while a connection is suspended. Every one was resumed above, so
        // this only holds if MHD never took one back within 5 s; leaking the daemon then is the lesser harm.
        guard !dispatcher.hasSuspendedConnections else { return }
        MHD_stop_daemon(daemon.raw)
    }

    /// How long `poll` may wait: until MHD's next connection timeout, at most 1 s. Connection activity, a
    /// resumed connection (MHD's own eventfd is in its epoll set) and `requestStop` all end the wait sooner.
    private func nextTimeoutMilliseconds() -> Int32 {
        var milliseconds: UInt64 = 0
        guard MHD_get_timeout(daemon.raw, &milliseconds) == .YES else { return 1000 }
        return Int32(min(milliseconds, 1000))
    }
}

/// The daemon handle.
///
/// `@unchecked Sendable`: `MHD_run` and `MHD_stop_daemon` are only called by one thread at a time, the loop's
/// while it runs and the owner's otherwise; the calls MHD allows from any thread (`MHD_resume_connection`)
/// take a connection, not this.
struct DaemonPointer: @unchecked Sendable {
    let raw: OpaquePointer
}
