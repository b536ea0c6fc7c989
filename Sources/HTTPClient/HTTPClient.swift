import CCurl
import Foundation
public import Observability
import Synchronization

/// An async HTTP client on libcurl's multi interface.
///
/// One dedicated thread runs the event loop and owns every libcurl handle; requests reach it through a
/// locked queue and `curl_multi_wakeup`. Thousands of requests can be in flight; connections are reused,
/// HTTP/2 is used where a TLS server offers it (requests to one host then share connections), and TLS
/// verification is always on for https.
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// CA bundle for https (`CURLOPT_CAINFO`); nil uses the system's. Default: nil.
        public var caFile: String?
        /// Connection set-up limit per request. Default: 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// Idle connections kept for reuse. Default: 2,000.
        public var connectionCacheSize = 2_000
        /// Connections per host at once; 0 is unlimited. Beyond it, requests wait for a connection (over
        /// HTTP/2 they share one). Default: 0.
        public var maxConnectionsPerHost = 0
        /// The largest response body accepted; a larger one fails the request (`.tooLarge`) instead of
        /// growing memory without bound. Default: 8 MiB (verifyReceipt's largest answers are about 1 MB).
        public var maxResponseBytes = 8 * 1_048_576
        /// Each request a child span of ``Span/current`` when that is recorded (OpenTelemetry's HTTP client
        /// conventions). Off for a client that sends the spans themselves. Default: true.
        public var recordsSpans = true

        public init() {}
    }

    private let loop: CurlEventLoop
    private let recordsSpans: Bool

    /// Proxies are libcurl's environment variables (`https_proxy`, `no_proxy`, ...), read here once.
    public convenience init(configuration: Configuration = Configuration(), logger: Logger) {
        self.init(configuration: configuration, proxies: .ofProcess(), logger: logger)
    }

    /// `proxies`: the proxy variables (tests give their own).
    init(configuration: Configuration, proxies: ProxyVariables, logger: Logger) {
        loop = CurlEventLoop(configuration: configuration, proxies: proxies, logger: logger)
        recordsSpans = configuration.recordsSpans
    }

    deinit {
        loop.shutdown()
    }

    /// Performs the request. Throws ``HTTPClientError`` when no response arrives; any HTTP status is a response.
    /// Cancelling the calling task aborts the request.
    public func execute(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard recordsSpans, let parent = Span.current, parent.context.sampled else { return try await perform(request) }
        let span = parent.child(request.method.rawValue, kind: .client, attributes: request.spanAttributes)
        return try await span.run {
            do {
                let response = try await perform(request)
                span.set("http.response.status_code", .int(Int64(response.status)))
                if response.status >= 400 { span.fail(String(response.status)) }
                return response
            } catch {
                span.set("error.type", .string((error as? HTTPClientError)?.kind.rawValue ?? "\(type(of: error))"))
                throw error
            }
        }
    }

    private func perform(_ request: HTTPRequest) async throws -> HTTPResponse {
        let transfer = Transfer(request: request)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                // Not submitted when already finished: cancelled before it was submitted, the loop found it
                // nowhere to abort and finished it here instead.
                if transfer.wait(continuation) { loop.submit(transfer) }
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }

    /// Requests in flight now.
    public var inFlight: Int { loop.inFlight }

    /// Turns of the event loop since start (tests: an idle client sleeps in epoll instead of spinning).
    var loopTurns: Int { loop.turns }

    /// Fails requests in flight and stops the event loop.
    public func shutdown() { loop.shutdown() }
}

/// One request's state, shared between the caller and the event loop.
final class Transfer: Sendable {
    private enum State {
        case created
        case waiting(UnsafeContinuation<HTTPResponse, any Error>)
        /// With the result of a transfer finished before its caller waited (cancelled before it was submitted).
        case finished(Result<HTTPResponse, HTTPClientError>?)
    }

    let request: HTTPRequest
    /// The caller's continuation is taken out under the lock by whoever resumes it, so it is resumed once:
    /// unsafe, not checked (whose canary is one more allocation a request).
    private let state = Mutex(State.created)

    init(request: HTTPRequest) { self.request = request }

    /// Keeps the caller's continuation for ``finish(_:)``; false, the caller resumed here, when the transfer was
    /// finished already (it must not be submitted then).
    func wait(_ continuation: UnsafeContinuation<HTTPResponse, any Error>) -> Bool {
        let early = state.withLock { state -> Result<HTTPResponse, HTTPClientError>?? in
            guard case .finished(let result) = state else {
                state = .waiting(continuation)
                return nil
            }
            state = .finished(nil)
            return .some(result)
        }
        guard let early else { return true }
        continuation.resume(
            with: early ?? .failure(HTTPClientError(kind: .cancelled, reason: "the request was cancelled")))
        return false
    }

    /// Whether the caller has been answered (or will be when it waits): the loop does not start such a transfer.
    var isFinished: Bool {
        state.withLock { if case .finished = $0 { true } else { false } }
    }

    /// Resumes the caller once (or keeps the result for when it waits); later calls do nothing.
    func finish(_ result: Result<HTTPResponse, HTTPClientError>) {
        let waiting = state.withLock { state -> UnsafeContinuation<HTTPResponse, any Error>? in
            switch state {
            case .created:
                state = .finished(result)
                return nil
            case .waiting(let continuation):
                state = .finished(nil)
                return continuation
            case .finished:
                return nil
            }
        }
        waiting?.resume(with: result.mapError { $0 as any Error })
    }
}
