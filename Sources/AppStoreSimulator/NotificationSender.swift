import Foundation
import HTTPClient
import Observability
import Synchronization

/// Where and how the simulator sends App Store Server Notifications V2.
struct NotificationSettings: Sendable {
    /// The app's notification URL; nil sends nothing (notifications are still recorded for the history).
    var url: String?
    /// The pause before each retry; one attempt plus one per entry. A compressed version of Apple's schedule
    /// (Apple: 1, 12, 24, 48 and 72 hours).
    var retryDelaysMs: [Int] = [1000, 2000, 4000, 8000, 16000]
    /// Items per page of Get Notification History (Apple: 20).
    var historyPageSize = 20
}

/// One notification the simulator made, and what became of sending it.
struct NotificationRecord: Sendable {
    struct Attempt: Sendable {
        let at: Date
        /// The HTTP status the receiver answered, nil when none arrived.
        let status: Int?
        /// Why no status arrived: the client's error.
        let error: String?
        /// Apple's sendAttemptResult for this attempt.
        let result: String
    }

    /// Order of creation: Get Notification History pages by it.
    let sequence: Int
    let uuid: String
    /// The app it is about: Get Notification History answers an app's token with that app's only.
    let bundleID: String
    let type: String
    let subtype: String?
    let environment: String
    let transactionID: String?
    let originalTransactionID: String?
    let signedDate: Date
    let signedPayload: String
    var attempts: [Attempt] = []
    var delivered = false
}

/// Every notification made, and their delivery in the background: each notification is posted by a task of its
/// own, which retries on the configured schedule until the receiver answers 200-206. The simulator's request
/// handlers only enqueue; they never wait for a receiver.
final class NotificationSender: Sendable {
    private struct State {
        var records: [NotificationRecord] = []
        var index: [String: Int] = [:]
        var deliveries: [String: Task<Void, Never>] = [:]
        var http: HTTPClient?
        var stopped = false
    }

    private let state = Mutex(State())

    /// Records the notification and, when a URL is set, starts delivering it.
    func send(_ record: NotificationRecord, settings: NotificationSettings) {
        state.withLock { state in
            state.index[record.uuid] = state.records.count
            state.records.append(record)
            guard let url = settings.url, !url.isEmpty, !state.stopped else { return }
            let http: HTTPClient
            if let existing = state.http {
                http = existing
            } else {
                http = HTTPClient(logger: Logger(label: "appstore-sim-notifications", minimumLevel: .error))
                state.http = http
            }
            let body = AppStoreSimulator.json(["signedPayload": record.signedPayload])
            let uuid = record.uuid
            let delays = settings.retryDelaysMs.map { max(0, $0) }
            state.deliveries[uuid] = Task { [weak self] in
                await self?.deliver(uuid: uuid, url: url, body: body, delays: delays, http: http)
            }
        }
    }

    private func deliver(uuid: String, url: String, body: Data, delays: [Int], http: HTTPClient) async {
        defer { _ = state.withLock { $0.deliveries.removeValue(forKey: uuid) } }
        var retry = 0
        while !Task.isCancelled {
            let request = HTTPRequest(
                method: .post, url: url, headers: [(name: "Content-Type", value: "application/json")], body: body,
                timeout: .seconds(5))
            let attempt: NotificationRecord.Attempt
            do {
                let response = try await http.execute(request)
                attempt = .init(
                    at: Date(), status: response.status, error: nil,
                    result: (200...206).contains(response.status) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
            } catch let error as HTTPClientError {
                if Task.isCancelled { return }
                let result =
                    switch error.kind {
                    case .timeout: "TIMED_OUT"
                    case .connection: "SOCKET_ISSUE"
                    default: "OTHER"
                    }
                attempt = .init(at: Date(), status: nil, error: error.description, result: result)
            } catch {
                if Task.isCancelled { return }
                attempt = .init(at: Date(), status: nil, error: "\(error)", result: "OTHER")
            }
            state.withLock { state in
                guard let position = state.index[uuid] else { return }
                state.records[position].attempts.append(attempt)
                if attempt.result == "SUCCESS" { state.records[position].delivered = true }
            }
            guard attempt.result != "SUCCESS", retry < delays.count else { return }
            try? await Task.sleep(for: .milliseconds(delays[retry]))
            retry += 1
        }
    }

    var records: [NotificationRecord] { state.withLock { $0.records } }

    /// Cancels every delivery in progress and closes the client; later notifications are only recorded.
    func stop() {
        let (tasks, http) = state.withLock { state in
            state.stopped = true
            defer {
                state.deliveries = [:]
                state.http = nil
            }
            return (Array(state.deliveries.values), state.http)
        }
        for task in tasks { task.cancel() }
        http?.shutdown()
    }
}
