import CCurl
import Foundation
import Observability

/// One transfer on a libcurl easy handle lent by the event loop (``CurlEventLoop``), with the transfer's buffers.
/// Lives on the event-loop thread only. The handle goes back to the loop's idle handles afterwards: a new one
/// per request cost its allocation, its 16 KB receive buffer and its cleanup each time (7 % of the client's CPU).
final class EasyTransfer {
    let handle: UnsafeMutableRawPointer
    let transfer: Transfer
    private var body = Data()
    private let maxBodyBytes: Int
    /// Set when the body outgrew `maxBodyBytes` (libcurl then reports a write error).
    private var overflowed = false
    private var headers: [(name: String, value: String)] = []
    private var headerList: UnsafeMutablePointer<curl_slist>?

    /// `handle`: fresh from `curl_easy_init` or emptied by `curl_easy_reset`; the caller takes it back when this
    /// throws.
    /// `timeout`: what is left of the request's (it may have waited for a connection).
    init(
        handle: UnsafeMutableRawPointer, transfer: Transfer, timeout: Duration, configuration: HTTPClient.Configuration,
        proxies: ProxyVariables
    ) throws(HTTPClientError) {
        maxBodyBytes = configuration.maxResponseBytes
        self.handle = handle
        self.transfer = transfer
        let request = transfer.request
        let context = Unmanaged.passUnretained(self).toOpaque()
        var ok = ccurl_easy_setopt_ptr(handle, CURLOPT_URL, request.url) == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1) == CURLE_OK
        // Given, so libcurl does not read the environment for them at every request.
        ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_PROXY, proxies.proxy(for: request.url)) == CURLE_OK
        ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_NOPROXY, proxies.noProxy) == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(max(1, timeout.milliseconds))) == CURLE_OK
        ok =
            ok
            && ccurl_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
                == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)) == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1) == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2) == CURLE_OK
        ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_PROTOCOLS, Int(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK
        ok = ok && ccurl_easy_setopt_write(handle, bodyCallback) == CURLE_OK
        ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_WRITEDATA, context) == CURLE_OK
        ok = ok && ccurl_easy_setopt_header(handle, headerCallback) == CURLE_OK
        ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, context) == CURLE_OK
        if let caFile = configuration.caFile {
            ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_CAINFO, caFile) == CURLE_OK
        }
        switch request.method {
        case .get: break
        case .post: ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_POST, 1) == CURLE_OK
        case .put, .delete:
            ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_CUSTOMREQUEST, request.method.rawValue) == CURLE_OK
        }
        // A POST without a body sends an empty one: libcurl would read one from standard input.
        if let payload = request.body ?? (request.method == .post ? Data() : nil) {
            ok = ok && ccurl_easy_setopt_long(handle, CURLOPT_POSTFIELDSIZE, payload.count) == CURLE_OK
            // COPYPOSTFIELDS: libcurl keeps its own copy, so the Data need not outlive this call.
            ok =
                ok
                && payload.withUnsafeBytes {
                    ccurl_easy_setopt_ptr(
                        handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                } == CURLE_OK
        }
        // No "Expect: 100-continue" round trip for bodies.
        for header in request.headers + [("Expect", "")] {
            headerList = curl_slist_append(headerList, "\(header.0): \(header.1)")
        }
        ok = ok && ccurl_easy_setopt_ptr(handle, CURLOPT_HTTPHEADER, headerList) == CURLE_OK
        guard ok else {
            throw HTTPClientError(kind: .invalidRequest, reason: "libcurl refused the request's options")
        }
    }

    deinit {
        curl_slist_free_all(headerList)
    }

    /// False when the body would outgrow its limit: the transfer is then aborted.
    fileprivate func append(body chunk: UnsafeRawBufferPointer) -> Bool {
        guard body.count + chunk.count <= maxBodyBytes else {
            overflowed = true
            body = Data()
            return false
        }
        body.append(contentsOf: chunk)
        return true
    }

    /// One header line as libcurl hands it over (`Name: value\r\n`): the name lower-cased (ASCII, as HTTP's
    /// names are), the value without the spaces, tabs and line ends around it. Read as bytes: Foundation's
    /// trimming and Unicode case mapping were 5 % of the client's CPU.
    fileprivate func append(headerLine line: UnsafeRawBufferPointer) {
        let bytes = line.bindMemory(to: UInt8.self)
        if bytes.starts(with: "HTTP/".utf8) {
            headers.removeAll()  // a new response (after a redirect or 100 Continue) starts
            return
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(unsafeUninitializedCapacity: colon) { buffer in
            for index in 0..<colon {
                let byte = bytes[index]
                buffer[index] = byte >= 65 && byte <= 90 ? byte + 32 : byte
            }
            return colon
        }
        var start = colon + 1
        var end = bytes.count
        func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 13 || byte == 10 }
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        headers.append((name, String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)))
    }

    func result(_ code: CURLcode) -> Result<HTTPResponse, HTTPClientError> {
        if overflowed {
            return .failure(HTTPClientError(kind: .tooLarge, reason: "the response is over \(maxBodyBytes) bytes"))
        }
        guard code == CURLE_OK else { return .failure(Self.error(code)) }
        var status = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        return .success(
            HTTPResponse(
                status: status, headers: headers, body: body,
                httpVersion: version == Int(CURL_HTTP_VERSION_2_0) ? "2" : "1.1"))
    }

    static func error(_ code: CURLcode) -> HTTPClientError {
        let reason = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT: return HTTPClientError(kind: .timeout, reason: reason)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING,
            CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            return HTTPClientError(kind: .connection, reason: reason)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            return HTTPClientError(kind: .tls, reason: reason)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return HTTPClientError(kind: .invalidRequest, reason: reason)
        default:
            return HTTPClientError(kind: .other, reason: reason)
        }
    }
}

private let bodyCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let length = size * count
    let kept = Unmanaged<EasyTransfer>.fromOpaque(context).takeUnretainedValue()
        .append(body: UnsafeRawBufferPointer(start: data, count: length))
    return kept ? length : 0
}

private let headerCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let length = size * count
    Unmanaged<EasyTransfer>.fromOpaque(context).takeUnretainedValue()
        .append(headerLine: UnsafeRawBufferPointer(start: data, count: length))
    return length
}
