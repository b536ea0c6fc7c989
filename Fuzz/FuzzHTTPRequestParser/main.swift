import CLibFuzzer
import Foundation
import HTTPServerKit

/// One connection's input, parsed as the epoll server's loop parses it: each request from where the previous
/// one ended, until the parser wants more bytes or refuses the rest. Parsed twice, all at once (pipelined
/// requests in one read) and a few bytes per read (the parser resuming its search and the loop compacting its
/// buffer in between): both must give the same requests and stop the same way.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = Transcript(input, readSize: max(size, 1))
    let trickled = Transcript(input, readSize: 1 + size % 16)
    precondition(whole == trickled, "reads of \(1 + size % 16) bytes parse \(trickled), one read \(whole)")
    return 0
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
                    precondition(
                        end > consumed && end <= buffer.count, "a request ends at \(end), not after \(consumed)")
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

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
