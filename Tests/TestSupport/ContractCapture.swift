import Foundation
import Synchronization

/// Records every message the end-to-end tests send or receive, when the test command asks for it
/// (`RECEIPT_WORKER_CONTRACT_CAPTURE=DIR`), so that Tests/contract/check_contract.py can validate real
/// messages against docs/schemas. One JSON line per message in `DIR/messages-PID.jsonl`:
/// `{"channel": "jobs"|"results"|"dlq"|"notifications"|"consumption", "key": ..., "headers": {...},
/// "value": "..."}`.
public enum ContractCapture {
    private static let file = Mutex<FileHandle?>(Self.open())

    private static func open() -> FileHandle? {
        guard let directory = ProcessInfo.processInfo.environment["RECEIPT_WORKER_CONTRACT_CAPTURE"] else { return nil }
        let path = "\(directory)/messages-\(getpid()).jsonl"
        guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        return FileHandle(forWritingAtPath: path)
    }

    /// `channel`: which contract message this is (`jobs`, `results`, `dlq`, `notifications`, `consumption`).
    public static func record(
        channel: String, key: [UInt8]?, headers: [(name: String, value: [UInt8]?)], value: [UInt8]
    ) {
        file.withLock { handle in
            guard let handle else { return }
            var headerObject: [String: String] = [:]
            for (name, value) in headers {
                headerObject[name] = value.map { String(decoding: $0, as: UTF8.self) } ?? ""
            }
            let line: [String: Any] = [
                "channel": channel, "key": key.map { String(decoding: $0, as: UTF8.self) } ?? NSNull(),
                "headers": headerObject, "value": String(decoding: value, as: UTF8.self),
            ]
            guard var data = try? JSONSerialization.data(withJSONObject: line) else { return }
            data.append(UInt8(ascii: "\n"))
            handle.write(data)
        }
    }
}
