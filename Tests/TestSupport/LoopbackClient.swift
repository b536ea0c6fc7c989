import Foundation
import Synchronization

/// A blocking TCP client on 127.0.0.1, for driving a server byte by byte: pipelining, stalling, oversized heads.
/// Use it on a thread of its own (`onThread`): the cooperative pool is where the server's handlers run.
///
/// `@unchecked Sendable`: one thread may send while another receives (a pipeline flood); `send` touches only the
/// descriptor, and `buffered` belongs to the receiving side.
public final class LoopbackClient: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ what: String) { description = "\(what): \(String(cString: strerror(errno)))" }
    }

    public struct Response: Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: String
    }

    public let fd: Int32
    private var buffered: [UInt8] = []

    /// Connects; reads and writes give up after `timeout` (a test never hangs on a silent server).
    public init(port: UInt16, timeout: Duration = .seconds(5)) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket") }
        let (seconds, attoseconds) = timeout.components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let failure = Failure("connect to 127.0.0.1:\(port)")
            Glibc.close(fd)
            throw failure
        }
    }

    deinit { Glibc.close(fd) }

    /// Writes everything. MSG_NOSIGNAL: a server that closes first must fail the write, not kill the tests.
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw Failure("send") }
            sent += count
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// The next bytes; empty when the server closed the connection.
    public func receive() throws -> [UInt8] {
        if !buffered.isEmpty {
            defer { buffered = [] }
            return buffered
        }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count >= 0 else { throw Failure("recv") }
        return Array(chunk[..<count])
    }

    /// Reads one response with a Content-Length body; nil when the connection closes before one arrives.
    public func readResponse() throws -> Response? {
        var data = buffered
        buffered = []
        while true {
            if let headEnd = Self.find([13, 10, 13, 10], in: data) {
                let head = String(decoding: data[..<headEnd], as: UTF8.self).split(separator: "\r\n")
                let statusLine = head.first?.split(separator: " ") ?? []
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure("status line") }
                var headers: [String: String] = [:]
                for line in head.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                        in: .whitespaces)
                }
                let length = headers["content-length"].flatMap { Int($0) } ?? 0
                let bodyStart = headEnd + 4
                if data.count >= bodyStart + length {
                    buffered = Array(data[(bodyStart + length)...])
                    let body = String(decoding: data[bodyStart..<(bodyStart + length)], as: UTF8.self)
                    return Response(status: status, headers: headers, body: body)
                }
            }
            let more = try receive()
            if more.isEmpty { return nil }
            data += more
        }
    }

    /// One request on a fresh connection, and how long its answer took.
    public static func get(_ path: String, port: UInt16) throws -> (response: Response?, elapsed: Duration) {
        let started = ContinuousClock.now
        let client = try LoopbackClient(port: port)
        try client.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let response = try client.readResponse()
        return (response, ContinuousClock.now - started)
    }

    public static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count)
        where haystack[index..<(index + needle.count)].elementsEqual(needle) {
            return index
        }
        return nil
    }
}

/// Runs blocking socket work on a thread of its own, so that it never holds one of the cooperative pool's
/// threads (two on a two-core machine), which the server's async handlers need.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Raises this process's open-file limit to at least `count` (as far as the hard limit allows); returns the
/// soft limit in effect.
public func raiseOpenFileLimit(to count: Int) -> Int {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < rlim_t(count) {
        limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    return Int(clamping: limit.rlim_cur)
}

/// Writes `count` pipelined GETs on one connection while another thread reads and counts the answers, and
/// probes the server on fresh connections meanwhile and afterwards. The test then asserts on the figures.
public struct PipelineFlood {
    public let answered: Int
    public let probeLatencies: [Duration]
    public let probesDuringFlood: Int
    public let elapsed: Duration

    public static func run(port: UInt16, count: Int, probePath: String) async throws -> PipelineFlood {
        let started = ContinuousClock.now
        let client = try LoopbackClient(port: port, timeout: .seconds(20))
        let progress = Atomic<Int>(0)
        let writer = Task {
            try await onThread {
                let request = Array("GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
                var batch: [UInt8] = []
                for index in 0..<count {
                    batch += request
                    if batch.count >= 64 * 1024 || index == count - 1 {
                        try client.send(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
        }
        let reader = Task {
            try await onThread {
                // Counts status lines as they stream by; the tail carries a line split across two reads.
                let marker = Array("HTTP/1.1 200 ".utf8)
                var tail: [UInt8] = []
                var answered = 0
                while answered < count {
                    let bytes = try client.receive()
                    if bytes.isEmpty { break }
                    let window = tail + bytes
                    var index = 0
                    while index + marker.count <= window.count {
                        if window[index] == marker[0] && window[index..<(index + marker.count)].elementsEqual(marker) {
                            answered += 1
                            index += marker.count
                        } else {
                            index += 1
                        }
                    }
                    tail = Array(window.suffix(marker.count - 1))
                    progress.store(answered, ordering: .relaxed)
                }
                return answered
            }
        }
        var latencies: [Duration] = []
        var during = 0
        while progress.load(ordering: .relaxed) < count && ContinuousClock.now - started < .seconds(30) {
            let probe = try await onThread { try LoopbackClient.get(probePath, port: port) }
            if probe.response?.status == 200 {
                latencies.append(probe.elapsed)
            } else {
                latencies.append(.seconds(3600))  // no answer counts as too slow
            }
            if progress.load(ordering: .relaxed) < count { during += 1 }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await writer.value
        let answered = try await reader.value
        let elapsed = ContinuousClock.now - started
        for _ in 0..<3 {
            let probe = try await onThread { try LoopbackClient.get(probePath, port: port) }
            latencies.append(probe.response?.status == 200 ? probe.elapsed : .seconds(3600))
        }
        return PipelineFlood(answered: answered, probeLatencies: latencies, probesDuringFlood: during, elapsed: elapsed)
    }
}
