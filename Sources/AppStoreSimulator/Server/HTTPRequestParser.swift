import Foundation
package import HTTPServerKit

/// Parses HTTP/1.1 requests with Content-Length bodies out of a connection's input buffer.
///
/// Linear in the input: a request is parsed in place from where the previous one ended (nothing is shifted per
/// request), and the search for the end of the headers resumes where the previous call left it, so headers that
/// arrive a few bytes at a time are scanned once.
package enum HTTPRequestParser {
    package enum Parse {
        case incomplete
        case invalid
        /// `end`: the index in the buffer just past this request.
        case request(ServerRequest, keepAlive: Bool, end: Int)
    }

    static let maximumHeaderBytes = 65_536
    static let maximumBodyBytes = 4 * 1_048_576

    /// Parses the request that starts at `start`. `scanned` is where the search for the headers' end resumes; it
    /// must be `start` for a new request and is advanced here while the headers are incomplete.
    package static func parse(_ buffer: [UInt8], from start: Int, scanned: inout Int) -> Parse {
        guard let headerEnd = find([13, 10, 13, 10], in: buffer, from: max(start, scanned)) else {
            scanned = max(start, buffer.count - 3)
            return buffer.count - start > maximumHeaderBytes ? .invalid : .incomplete
        }
        let head = String(decoding: buffer[start..<headerEnd], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.isEmpty else { return .invalid }
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else { return .invalid }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return .invalid }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? -1
        guard length >= 0, length <= maximumBodyBytes, headers["transfer-encoding"] == nil else { return .invalid }
        let bodyStart = headerEnd + 4
        guard buffer.count >= bodyStart + length else { return .incomplete }
        let body = Data(buffer[bodyStart..<(bodyStart + length)])

        let target = String(requestLine[1])
        let pathEnd = target.firstIndex(of: "?") ?? target.endIndex
        var query: [String: String] = [:]
        if pathEnd < target.endIndex {
            for pair in target[target.index(after: pathEnd)...].split(separator: "&") {
                // Empty sides kept: `?=` is an empty key (not no parts at all, which trapped), `?=x` the value x.
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                query[key] = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
            }
        }
        let keepAlive =
            requestLine[2] == "HTTP/1.1"
            ? headers["connection"]?.lowercased() != "close"
            : headers["connection"]?.lowercased() == "keep-alive"
        let request = ServerRequest(
            method: String(requestLine[0]), path: String(target[..<pathEnd]), query: query, headers: headers, body: body
        )
        return .request(request, keepAlive: keepAlive, end: bodyStart + length)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count - start >= needle.count else { return nil }
        for index in start...(haystack.count - needle.count)
        where haystack[index] == needle[0] && haystack[index + 1] == needle[1] && haystack[index + 2] == needle[2]
            && haystack[index + 3] == needle[3]
        {
            return index
        }
        return nil
    }
}

enum HTTPStatusText {
    static func text(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 404: "Not Found"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
