import CCurl
import CLinux
import Foundation
import Observability
import Synchronization

/// The thread that owns the `CURLM` handles (``CurlMultiShard``) and every easy handle. Only `submit`, `cancel`, `shutdown` and
/// `inFlight` are called from other threads; they touch the locked inbox and the wake-up eventfd only.
///
/// libcurl's multi_socket API on epoll: libcurl says which sockets to watch (the socket callback) and when
/// it next needs time (the timer callback); each ready socket is handed back alone. The cost of an event
/// stays flat however many transfers are in flight, where `curl_multi_perform` + `curl_multi_poll` walk
/// every handle and poll every socket on each wake-up (measured: that was a fifth of the worker's CPU with
/// 1,000 requests in flight).
///
/// `@unchecked Sendable`: `shards`, `active` and `registered` are used on the loop thread only (libcurl calls
/// the callbacks from inside `curl_multi_socket_action` there); the rest is locked or atomic.
final class CurlEventLoop: @unchecked Sendable {
    private struct Inbox {
        var submitted: [Transfer] = []
        var cancelled: [Transfer] = []
        var stopping = false
    }

    private var shards: [CurlMultiShard] = []
    /// Transfers in flight per handle: each new one goes to the least busy (ties to the next in turn).
    private var shardLoads: [Int] = []
    private var nextShard = 0
    private let configuration: HTTPClient.Configuration
    private let proxies: ProxyVariables
    private let logger: Logger
    private let inbox = Mutex(Inbox())
    private let activeCount = Atomic<Int>(0)
    private let turnCount = Atomic<Int>(0)
    private let exited = DispatchSemaphore(value: 0)
    private var active: [UnsafeMutableRawPointer: (easy: EasyTransfer, shard: Int, host: Int)] = [:]
    /// Requests past their host's connections, waiting for one.
    private var hosts: HostQueue
    /// Easy handles of finished transfers, emptied by `curl_easy_reset` (which keeps their buffers), for the
    /// next ones; at most `maxIdleHandles` (about 20 KB each: no more than the requests in flight held at their
    /// peak), the rest cleaned up. With 256, a wave of answers at 1,000 in flight still cleaned up and made
    /// handles again.
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private let maxIdleHandles = 1_024
    /// The sockets registered with epoll, each with its multi handle and whether libcurl wants it watched now.
    /// A socket libcurl stops watching (its transfer ended, the connection kept for the next one) stays
    /// registered, dormant: it is taken out only if it reports an event, so a connection reused at once costs
    /// one `epoll_ctl`, not two.
    var registered: [curl_socket_t: (shard: Int, watching: Bool)] = [:]
    let epoll: Int32
    private let wakeup: Int32

    init(configuration: HTTPClient.Configuration, proxies: ProxyVariables, logger: Logger) {
        CurlGlobal.initialize()
        self.configuration = configuration
        self.proxies = proxies
        self.logger = logger
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeup = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeup
        epoll_ctl(epoll, EPOLL_CTL_ADD, wakeup, &event)
        let count = CurlMultiShard.count(for: configuration)
        hosts = HostQueue(limit: configuration.maxConnectionsPerHost, shards: count)
        shards = (0..<count).map { CurlMultiShard(index: $0, of: count, configuration: configuration, loop: self) }
        shardLoads = Array(repeating: 0, count: count)
        NamedThread.start("http-client") { [self] in run() }
    }

    var inFlight: Int { activeCount.load(ordering: .relaxed) }

    /// Turns of the loop since start: for tests that an idle client sleeps instead of spinning.
    var turns: Int { turnCount.load(ordering: .relaxed) }

    func submit(_ transfer: Transfer) {
        let (accepted, first) = inbox.withLock { inbox in
            guard !inbox.stopping else { return (false, false) }
            inbox.submitted.append(transfer)
            return (true, inbox.submitted.count == 1)
        }
        guard accepted else {
            return transfer.finish(.failure(HTTPClientError(kind: .shutdown, reason: "the HTTP client is shut down")))
        }
        // Only the first of a batch wakes the loop: it takes the whole inbox at once, and a request submitted
        // after it took the inbox is again the first. A write per request was a system call each.
        if first { wake() }
    }

    func cancel(_ transfer: Transfer) {
        // After shutdown every transfer has been failed already: nothing to cancel.
        let accepted = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            inbox.cancelled.append(transfer)
            return true
        }
        if accepted { wake() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    func shutdown() {
        let first = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard first else { return }
        wake()
        exited.wait()
    }

    private func run() {
        var running: Int32 = 0
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let (submitted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submitted.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll(keepingCapacity: true)
                }
                return (inbox.submitted, inbox.cancelled, inbox.stopping)
            }
            for transfer in submitted { start(transfer) }
            for transfer in cancelled {
                abort(transfer, HTTPClientError(kind: .cancelled, reason: "the request was cancelled"))
            }
            if stopping { break }
            // Connections freed by the last turn's ends and this turn's cancellations go to waiting requests first.
            startWaiting()
            turnCount.add(1, ordering: .relaxed)
            let count = epoll_wait(epoll, &events, Int32(events.count), waitMilliseconds())
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                let ready = events[index].events
                if fd == wakeup {
                    var value: UInt64 = 0
                    _ = read(wakeup, &value, 8)
                    continue
                }
                guard let shard = registered[fd]?.shard, !isDormant(fd) else { continue }
                var flags: Int32 = 0
                if ready & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
                if ready & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
                if ready & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_ERR }
                curl_multi_socket_action(shards[shard].multi, fd, flags, &running)
            }
            for shard in shards {
                guard let deadline = shard.timerDeadline, deadline <= .now else { continue }
                shard.timerDeadline = nil
                curl_multi_socket_action(shard.multi, ccurl_socket_timeout(), 0, &running)
            }
            for shard in shards { collectFinished(shard) }
        }
        for waiting in hosts.drain() {
            activeCount.subtract(1, ordering: .relaxed)
            waiting.transfer.finish(.failure(HTTPClientError(kind: .shutdown, reason: "the HTTP client shut down")))
        }
        for transfer in active.values.map(\.easy.transfer) {
            abort(transfer, HTTPClientError(kind: .shutdown, reason: "the HTTP client shut down"))
        }
        for handle in idleHandles { curl_easy_cleanup(handle) }
        idleHandles = []
        for shard in shards { curl_multi_cleanup(shard.multi) }
        close(epoll)
        exited.signal()
    }

    /// The eventfd is closed here, not when the loop ends: `cancel` may still write to it after `shutdown` (a
    /// task cancelled late), and a number closed earlier could by then be another descriptor's (a socket, the
    /// ledger's file) that those 8 bytes would land in.
    deinit { close(wakeup) }

    /// Until libcurl's next timeout on any handle, or a waiting request's (at most a second: the inbox is also
    /// woken by its eventfd).
    private func waitMilliseconds() -> Int32 {
        var next = hosts.nextDeadline
        for shard in shards {
            if let deadline = shard.timerDeadline, next.map({ deadline < $0 }) ?? true { next = deadline }
        }
        guard let deadline = next else { return 1_000 }
        let remaining = deadline - .now
        guard remaining > .zero else { return 0 }
        return Int32(clamping: min(1_000, max(1, remaining.milliseconds)))
    }

    private func start(_ transfer: Transfer) {
        // Cancelled after it was submitted and before this turn took it: its caller has its answer already.
        guard !transfer.isFinished else { return }
        activeCount.add(1, ordering: .relaxed)
        let host = hosts.host(of: transfer.request.url)
        if hosts.mustWait(host) { return hosts.wait(transfer, host: host) }
        launch(transfer, host: host, timeout: transfer.request.timeout)
    }

    /// Hands a transfer to the least busy multi handle with room for its host.
    private func launch(_ transfer: Transfer, host: Int, timeout: Duration) {
        guard let handle = idleHandles.popLast() ?? curl_easy_init() else {
            activeCount.subtract(1, ordering: .relaxed)
            return transfer.finish(.failure(HTTPClientError(kind: .other, reason: "curl_easy_init failed")))
        }
        do {
            let easy = try EasyTransfer(
                handle: handle, transfer: transfer, timeout: timeout, configuration: configuration, proxies: proxies)
            let shard = leastBusyShard(for: host)
            shardLoads[shard] += 1
            hosts.started(host, on: shard)
            active[easy.handle] = (easy, shard, host)
            curl_multi_add_handle(shards[shard].multi, easy.handle)
        } catch {
            recycle(handle)
            activeCount.subtract(1, ordering: .relaxed)
            transfer.finish(.failure(error))
        }
    }

    /// Starts the waiting requests whose hosts have room again; fails those whose timeout passed as they waited.
    private func startWaiting() {
        // Cancelled as it waited (answered already: this does nothing to it), or its time is up.
        func timedOut(_ waiting: HostQueue.Waiting) {
            activeCount.subtract(1, ordering: .relaxed)
            waiting.transfer.finish(
                .failure(HTTPClientError(kind: .timeout, reason: "no connection to the host came free in time")))
        }
        for waiting in hosts.expired(at: .now) { timedOut(waiting) }
        while let (waiting, host) = hosts.next() {
            let remaining = waiting.deadline - .now
            guard !waiting.transfer.isFinished, remaining > .zero else {
                timedOut(waiting)
                continue
            }
            launch(waiting.transfer, host: host, timeout: remaining)
        }
    }

    /// The handle with the fewest transfers in flight among those with room for `host` (ties to the next in turn).
    private func leastBusyShard(for host: Int) -> Int {
        var best: Int?
        for step in 0..<shards.count {
            let candidate = (nextShard + step) % shards.count
            guard hosts.hasRoom(host, on: candidate) else { continue }
            if best.map({ shardLoads[candidate] < shardLoads[$0] }) ?? true { best = candidate }
        }
        // None with room only for a host past its limit when it was not held back (libcurl then queues it).
        let chosen = best ?? nextShard
        nextShard = (chosen + 1) % shards.count
        return chosen
    }

    /// Keeps a handle no transfer uses any more for the next one, or cleans it up when enough are idle. Reset, not
    /// merely given the next request's options: libcurl 7.88 clears a handle's count of the retries it makes on a
    /// reused connection found dead only here (`state.retrycount`), so a handle never reset would fail every sixth
    /// such retry of its life; the reset also frees the copy of the last request's body.
    private func recycle(_ handle: UnsafeMutableRawPointer) {
        guard idleHandles.count < maxIdleHandles else { return curl_easy_cleanup(handle) }
        curl_easy_reset(handle)
        idleHandles.append(handle)
    }

    private func abort(_ transfer: Transfer, _ error: HTTPClientError) {
        if let easy = active.values.first(where: { $0.easy.transfer === transfer })?.easy {
            remove(easy)
        }
        transfer.finish(.failure(error))
    }

    /// Takes a transfer out of the multi handle; its handle is recycled, so read its result first.
    private func remove(_ easy: EasyTransfer, httpVersion: String? = nil) {
        guard let (_, shard, host) = active[easy.handle] else { return }
        curl_multi_remove_handle(shards[shard].multi, easy.handle)
        shardLoads[shard] -= 1
        hosts.ended(host, on: shard, httpVersion: httpVersion)
        active[easy.handle] = nil
        activeCount.subtract(1, ordering: .relaxed)
        recycle(easy.handle)
    }

    private func collectFinished(_ shard: CurlMultiShard) {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(shard.multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                let easy = active[UnsafeMutableRawPointer(handle)]?.easy
            else { continue }
            let result = easy.result(message.pointee.data.result)
            remove(easy, httpVersion: try? result.get().httpVersion)
            easy.transfer.finish(result)
        }
    }
}

/// libcurl's global initialisation, once per process, before any handle exists.
enum CurlGlobal {
    private static let once: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
    static func initialize() { _ = once }
}
