import CCurl
import Foundation
import Observability
import Synchronization

/// The thread that owns the `CURLM` handle and every easy handle. Only `submit`, `cancel`, `shutdown` and
/// `inFlight` are called from other threads; they touch the locked inbox and `curl_multi_wakeup` only.
///
/// `@unchecked Sendable`: `multi` and `active` are used on the loop thread only; the rest is locked or atomic.
final class CurlEventLoop: @unchecked Sendable {
    private struct Inbox {
        var submitted: [Transfer] = []
        var cancelled: [Transfer] = []
        var stopping = false
    }

    private let multi: UnsafeMutableRawPointer
    private let configuration: HTTPClient.Configuration
    private let logger: Logger
    private let inbox = Mutex(Inbox())
    private let activeCount = Atomic<Int>(0)
    private let exited = DispatchSemaphore(value: 0)
    private var active: [UnsafeMutableRawPointer: EasyTransfer] = [:]

    init(configuration: HTTPClient.Configuration, logger: Logger) {
        CurlGlobal.initialize()
        multi = curl_multi_init()!  // fails only when out of memory
        ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
        ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, configuration.connectionCacheSize)
        ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        self.configuration = configuration
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.name = "http-client-loop"
        thread.start()
    }

    var inFlight: Int { activeCount.load(ordering: .relaxed) }

    func submit(_ transfer: Transfer) {
        let accepted = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            inbox.submitted.append(transfer)
            return true
        }
        guard accepted else {
            return transfer.finish(.failure(HTTPClientError(kind: .shutdown, reason: "the HTTP client is shut down")))
        }
        curl_multi_wakeup(multi)
    }

    func cancel(_ transfer: Transfer) {
        inbox.withLock { $0.cancelled.append(transfer) }
        curl_multi_wakeup(multi)
    }

    func shutdown() {
        let first = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard first else { return }
        curl_multi_wakeup(multi)
        exited.wait()
    }

    private func run() {
        var stillRunning: Int32 = 0
        while true {
            let (submitted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submitted.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll(keepingCapacity: true)
                }
                return (inbox.submitted, inbox.cancelled, inbox.stopping)
            }
            for transfer in submitted { start(transfer) }
            for transfer in cancelled { abort(transfer, HTTPClientError(kind: .cancelled, reason: "the request was cancelled")) }
            if stopping { break }
            curl_multi_perform(multi, &stillRunning)
            collectFinished()
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for transfer in active.values.map(\.transfer) {
            abort(transfer, HTTPClientError(kind: .shutdown, reason: "the HTTP client shut down"))
        }
        curl_multi_cleanup(multi)
        exited.signal()
    }

    private func start(_ transfer: Transfer) {
        do {
            let easy = try EasyTransfer(transfer: transfer, configuration: configuration)
            active[easy.handle] = easy
            activeCount.add(1, ordering: .relaxed)
            curl_multi_add_handle(multi, easy.handle)
        } catch {
            transfer.finish(.failure(error))
        }
    }

    private func abort(_ transfer: Transfer, _ error: HTTPClientError) {
        if let easy = active.values.first(where: { $0.transfer === transfer }) {
            remove(easy)
        }
        transfer.finish(.failure(error))
    }

    private func remove(_ easy: EasyTransfer) {
        curl_multi_remove_handle(multi, easy.handle)
        active[easy.handle] = nil
        activeCount.subtract(1, ordering: .relaxed)
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                let easy = active[UnsafeMutableRawPointer(handle)]
            else { continue }
            let code = message.pointee.data.result
            remove(easy)
            easy.transfer.finish(easy.result(code))
        }
    }
}

/// libcurl's global initialisation, once per process, before any handle exists.
enum CurlGlobal {
    private static let once: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
    static func initialize() { _ = once }
}
