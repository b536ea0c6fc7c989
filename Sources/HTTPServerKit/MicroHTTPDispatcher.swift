import CMicroHTTPD
import Foundation
import Synchronization

/// libmicrohttpd's access handler for `MicroHTTPServer`: gathers each request, hands it to the async handler off
/// MHD's thread, and queues the reply when the handler is done.
///
/// A request's life: MHD calls `access` once with the headers, once per piece of body, then once with nothing
/// left to read. On that last call the connection is suspended (MHD stops reading it and does not time it out)
/// and the handler runs in a `Task`. The task stores the reply and resumes the connection; MHD calls `access`
/// again, which queues the reply. Everything except `deliver` and `beginStopping` runs on the event loop's thread.
final class MicroHTTPDispatcher: Sendable {
    let limits: HTTPServerLimits
    /// The event loop's eventfd: written after each resume. MHD's own wake-up does not reach an external epoll
    /// loop in 0.9.75, which left resumed connections waiting for the next timeout.
    private let wakeup: Int32
    private let handler: @Sendable (ServerRequest) async -> ServerReply
    private let parking = Mutex(Parking())
    /// Connections waiting for a request's headers (open, or answered and kept), since when: touched on the event
    /// loop's thread only (MHD's callbacks and the loop's sweep), locked for `Sendable`.
    /// Keyed by the connection's address.
    private let awaitingHeaders = Mutex<[UInt: ContinuousClock.Instant]>([:])

    /// Suspended connections. Every `MHD_resume_connection` happens under this lock, and only for a request
    /// still in `waiting`, so a connection is resumed exactly once, and never after `MHD_stop_daemon`
    /// (which waits until `suspended` is 0, read under the same lock).
    private struct Parking {
        var stopping = false
        /// Suspended, the handler still running.
        var waiting: [ObjectIdentifier: ParkedRequest] = [:]
        /// Replies stored for resumed connections, taken when MHD calls the access handler again.
        var answered: [ObjectIdentifier: ServerReply] = [:]
        /// Suspended or resumed, and not yet back in the access handler.
        var suspended = 0
    }

    static let shuttingDown = ServerReply.text(503, "shutting down\n")

    init(limits: HTTPServerLimits, wakeup: Int32, handler: @escaping @Sendable (ServerRequest) async -> ServerReply) {
        self.limits = limits
        self.wakeup = wakeup
        self.handler = handler
    }

    /// Whether some connection is still suspended (or resumed but not yet answered).
    var hasSuspendedConnections: Bool { parking.withLock { $0.suspended > 0 } }

    /// Stops handing requests to the handler and resumes every suspended connection with a 503, so that the
    /// daemon can be stopped (MHD aborts the process when stopped with a connection still suspended).
    func beginStopping() {
        parking.withLock { parking in
            parking.stopping = true
            for (id, request) in parking.waiting {
                parking.answered[id] = Self.shuttingDown
                resume(request.connection)
            }
            parking.waiting = [:]
        }
    }

    // MARK: - The access handler

    func access(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        upload: UnsafeRawBufferPointer?, unread: UnsafeMutablePointer<Int>,
        slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let pointer = slot.pointee else {
            // First call, with the headers. The context is released in `completed`.
            awaitingHeaders.withLock { _ = $0.removeValue(forKey: Self.key(connection)) }
            let request = MicroHTTPRequest(
                method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/")
            slot.pointee = Unmanaged.passRetained(request).toOpaque()
            if let declared = Self.header("Content-Length", of: connection).flatMap({ UInt64($0) }),
                declared > UInt64(limits.maximumBodyBytes)
            {
                // Queued before the body is read: MHD discards the body and closes after the answer.
                return queue(.text(413, "request body too large\n"), on: connection)
            }
            return .YES
        }
        let request = Unmanaged<MicroHTTPRequest>.fromOpaque(pointer).takeUnretainedValue()
        if let upload, !upload.isEmpty {
            // Trickled past its time: closed (MHD ends a connection whose handler says no), its buffer freed.
            guard ContinuousClock.now - request.started <= .seconds(limits.bodyTimeoutSeconds) else { return .NO }
            receive(upload, into: request)
            unread.pointee = 0
            return .YES
        }
        if let parked = request.parked {
            request.parked = nil
            return queue(takeReply(for: parked), on: connection)
        }
        if request.bodyTooLarge {
            // A chunked body that outgrew the limit: the rest was discarded as it arrived.
            return queue(.text(413, "request body too large\n"), on: connection)
        }
        dispatch(request, on: connection)
        return .YES
    }

    /// A request's context is released when MHD is done with the request (answered, or connection closed); a
    /// connection kept waits for its next request's headers from now.
    func completed(connection: OpaquePointer?, slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        if let connection {
            awaitingHeaders.withLock { $0[Self.key(connection)] = ContinuousClock.now }
        }
        guard let pointer = slot.pointee else { return }
        Unmanaged<MicroHTTPRequest>.fromOpaque(pointer).release()
        slot.pointee = nil
    }

    /// A connection opened (its first request's headers are awaited from now) or closed.
    func connection(_ connection: OpaquePointer, opened: Bool) {
        awaitingHeaders.withLock { waiting in
            if opened {
                waiting[Self.key(connection)] = ContinuousClock.now
            } else {
                waiting[Self.key(connection)] = nil
            }
        }
    }

    /// The connections that have waited `limit` or more for a request's headers, no longer watched.
    func takeOverdueHeaders(after limit: Duration) -> [OpaquePointer] {
        let now = ContinuousClock.now
        let overdue = awaitingHeaders.withLock { waiting in
            let overdue = waiting.filter { now - $0.value >= limit }.keys
            for key in overdue { waiting[key] = nil }
            return Array(overdue)
        }
        return overdue.compactMap { OpaquePointer(bitPattern: $0) }
    }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }

    private func receive(_ upload: UnsafeRawBufferPointer, into request: MicroHTTPRequest) {
        guard !request.bodyTooLarge else { return }
        guard request.body.count + upload.count <= limits.maximumBodyBytes else {
            request.bodyTooLarge = true
            request.body = Data()
            return
        }
        request.body.append(contentsOf: upload)
    }

    /// Suspends the connection and runs the handler in a task; the task resumes the connection with the reply.
    private func dispatch(_ request: MicroHTTPRequest, on connection: OpaquePointer) {
        let serverRequest = ServerRequest(
            method: request.method, path: request.path, query: Self.values(.GET_ARGUMENT_KIND, of: connection),
            headers: Self.values(.HEADER_KIND, of: connection, lowercasingNames: true), body: request.body)
        request.body = Data()
        let parked = ParkedRequest(connection: connection)
        request.parked = parked
        MHD_suspend_connection(connection)
        guard park(parked) else { return }
        Task { [handler] in
            let reply = await handler(serverRequest)
            let delay: Duration
            switch reply {
            case .respond(_, _, _, let after), .drop(let after): delay = after
            }
            // Sleeping is the simulated latency; this task is never cancelled, so the sleep cannot throw.
            if delay > .zero { try? await Task.sleep(for: delay) }
            self.deliver(reply, to: parked)
        }
    }

    /// Records a freshly suspended connection. While stopping, answers it 503 at once instead.
    private func park(_ parked: ParkedRequest) -> Bool {
        parking.withLock { parking in
            parking.suspended += 1
            let id = ObjectIdentifier(parked)
            guard !parking.stopping else {
                parking.answered[id] = Self.shuttingDown
                resume(parked.connection)
                return false
            }
            parking.waiting[id] = parked
            return true
        }
    }

    /// Called from the handler's task. A reply that comes after `beginStopping` answered the request is dropped.
    private func deliver(_ reply: ServerReply, to parked: ParkedRequest) {
        parking.withLock { parking in
            let id = ObjectIdentifier(parked)
            guard parking.waiting.removeValue(forKey: id) != nil else { return }
            parking.answered[id] = reply
            resume(parked.connection)
        }
    }

    /// Only under the `parking` lock.
    private func resume(_ connection: OpaquePointer) {
        MHD_resume_connection(connection)
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
    }

    private func takeReply(for parked: ParkedRequest) -> ServerReply {
        parking.withLock { parking in
            parking.suspended -= 1
            return parking.answered.removeValue(forKey: ObjectIdentifier(parked)) ?? Self.shuttingDown
        }
    }

    /// Queues `reply`; for `.drop`, returns `MHD_NO`, on which MHD closes the connection without a response.
    private func queue(_ reply: ServerReply, on connection: OpaquePointer) -> MHD_Result {
        guard case .respond(let status, let headers, let body, _) = reply else { return .NO }
        let code = UInt32(exactly: status).flatMap { (100...999).contains($0) ? $0 : nil } ?? 500
        let response = body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let response else { return .NO }
        defer { MHD_destroy_response(response) }
        // MHD refuses a header with CR or LF in it, and sets Content-Length itself; such a header is left out.
        for (name, value) in headers { _ = MHD_add_response_header(response, name, value) }
        return MHD_queue_response(connection, code, response)
    }

    // MARK: - Reading what MHD parsed

    private static func header(_ name: String, of connection: OpaquePointer) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// Headers or query arguments. A repeated header's values are joined with ", " (RFC 9110); a repeated
    /// query argument keeps its last value; an argument without "=" has the value "".
    private static func values(
        _ kind: MHD_ValueKind, of connection: OpaquePointer, lowercasingNames: Bool = false
    ) -> [String: String] {
        final class Collected {
            var pairs: [(String, String)] = []
        }
        let collected = Collected()
        _ = MHD_get_connection_values(
            connection, kind,
            { context, _, key, value in
                guard let context, let key else { return .YES }
                let collected = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
                collected.pairs.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
                return .YES
            }, Unmanaged.passUnretained(collected).toOpaque())
        var values: [String: String] = [:]
        for (key, value) in collected.pairs {
            let name = lowercasingNames ? key.lowercased() : key
            if lowercasingNames, let earlier = values[name] {
                values[name] = earlier + ", " + value
            } else {
                values[name] = value
            }
        }
        return values
    }
}

/// One request as it arrives; touched only on the event loop's thread.
final class MicroHTTPRequest {
    let method: String
    let path: String
    var body = Data()
    var bodyTooLarge = false
    /// When its headers arrived: its body has ``HTTPServerLimits/bodyTimeoutSeconds`` from then.
    let started = ContinuousClock.now
    /// Set while the connection is suspended for the handler.
    var parked: ParkedRequest?

    init(method: String, path: String) {
        self.method = method
        self.path = path
    }
}

/// A suspended connection, as the handler's task holds it to resume it.
///
/// `@unchecked Sendable`: the pointer is only used by `MHD_resume_connection` under `MicroHTTPDispatcher`'s
/// lock, and only while the request is in its `waiting` set; while a connection is suspended MHD neither
/// reads, times out nor frees it, and `MHD_stop_daemon` is only called once none is left.
final class ParkedRequest: @unchecked Sendable {
    let connection: OpaquePointer

    init(connection: OpaquePointer) { self.connection = connection }
}
