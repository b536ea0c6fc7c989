import Foundation
import AppStoreSimulator
import HTTPServerKit

extension FuzzChecks {
    /// One connection's input, parsed as the epoll server's loop parses it: each request from where the
    /// previous one ended, until the parser wants more bytes or refuses the rest. Parsed twice, all at once
    /// (pipelined requests in one read) and a few bytes per read (the parser resuming its search and the loop
    /// compacting its buffer in between): both must give the same requests and stop the same way.
    @Sendable public static func httpRequestParser(_ input: [UInt8]) -> String? {
        let whole = Transcript(input, readSize: max(input.count, 1))
        let trickled = Transcript(input, readSize: 1 + input.count % 16)
        if let problem = whole.problem ?? trickled.problem { return problem }
        guard whole == trickled else {
            return "reads of \(1 + input.count % 16) bytes parse \(trickled), one read \(whole)"
        }
        return nil
    }
}

/// What the parser made of a connection's input.
struct Transcript: Equatable, CustomStringConvertible {
    struct Request: Equatable {
        var method: String
        var path: String
        var query: [String: String]
        var headers: [String: String]
        var body: Data
        var keepAlive: Bool
    }

    var requests: [Request] = []
    /// The parser refused the input after `requests` (the server answers 400 and closes).
    var refused = false
    /// A promise the parser broke.
    var problem: String?

    var description: String { "\(requests.count) request(s)\(refused ? ", then refused" : "")" }

    /// The input arriving `readSize` bytes per read. The parser's API is used here only: a change of it is a
    /// change of this initialiser (the server loop's `serveNext` and `Connection.compactInput` show the caller).
    init(_ input: [UInt8], readSize: Int) {
        var buffer: [UInt8] = []
        var consumed = 0
        var scanned = 0
        var read = 0
        repeat {
            buffer.append(contentsOf: input[read..<min(read + readSize, input.count)])
            read += readSize
            parsing: while true {
                switch HTTPRequestParser.parse(buffer, from: consumed, scanned: &scanned) {
                case .incomplete:
                    break parsing
                case .invalid:
                    refused = true
                    return
                case .request(let request, let keepAlive, let end):
                    // Each request must take its bytes, or the server would answer it forever.
                    guard end > consumed && end <= buffer.count else {
                        problem = "a request ends at \(end), not after \(consumed)"
                        return
                    }
                    requests.append(
                        Request(
                            method: request.method, path: request.path, query: request.query,
                            headers: request.headers, body: request.body, keepAlive: keepAlive))
                    consumed = end
                    scanned = end
                }
            }
            if consumed > 0, consumed * 2 >= buffer.count {
                buffer.removeFirst(consumed)
                scanned -= consumed
                consumed = 0
            }
        } while read < input.count
    }
}
