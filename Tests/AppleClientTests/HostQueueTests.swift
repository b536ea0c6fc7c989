import Foundation
@testable import HTTPClient
import Testing

/// Requests past a host's connections wait in the client's own queue, in order, until one of that host's transfers
/// ends; a host that answered over HTTP/2 shares its connections, and nothing waits for it.
@Suite("Requests waiting for a host's connections")
struct HostQueueTests {
    func transfer(_ url: String, timeout: Duration = .seconds(10)) -> Transfer {
        Transfer(request: HTTPRequest(url: url, timeout: timeout))
    }

    @Test("past the limit requests wait, start in order as transfers end, and one host's wait is not another's")
    func waitsInOrder() {
        var queue = HostQueue(limit: 2, shards: 1)
        let apple = queue.host(of: "https://buy.itunes.apple.com/verifyReceipt")
        #expect(queue.host(of: "https://buy.itunes.apple.com/other?x=1") == apple)
        let sandbox = queue.host(of: "https://sandbox.itunes.apple.com/verifyReceipt")
        #expect(sandbox != apple && queue.host(of: "https://buy.itunes.apple.com.evil.example/") != apple)
        queue.started(apple, on: 0)
        queue.started(apple, on: 0)
        #expect(queue.mustWait(apple) && !queue.mustWait(sandbox))
        let (first, second) = (transfer("https://buy.itunes.apple.com/a"), transfer("https://buy.itunes.apple.com/b"))
        queue.wait(first, host: apple)
        queue.wait(second, host: apple)
        #expect(queue.next() == nil, "no connection free yet")
        queue.ended(apple, on: 0, httpVersion: "1.1")
        let next = queue.next()
        #expect(next?.0.transfer === first && next?.host == apple)
        queue.started(apple, on: 0)
        #expect(queue.next() == nil && queue.mustWait(apple), "the second waits for the next end")
        queue.ended(apple, on: 0, httpVersion: "1.1")
        #expect(queue.next()?.0.transfer === second)
    }

    @Test("a host that answered over HTTP/2 has nothing wait; its waiting requests start")
    func multiplexed() {
        var queue = HostQueue(limit: 1, shards: 1)
        let host = queue.host(of: "https://api.storekit.itunes.apple.com/inApps/v1/history/1")
        queue.started(host, on: 0)
        queue.wait(transfer("https://api.storekit.itunes.apple.com/inApps/v1/history/2"), host: host)
        queue.started(host, on: 0)  // past the limit, as libcurl may be given one before any answer said HTTP/2
        queue.ended(host, on: 0, httpVersion: "2")
        #expect(!queue.mustWait(host))
        #expect(queue.next() != nil)
    }

    @Test("a request that waited past its timeout, or was cancelled, is taken out; one with time left stays")
    func expired() {
        var queue = HostQueue(limit: 1, shards: 1)
        let host = queue.host(of: "http://127.0.0.1:8080/")
        queue.started(host, on: 0)
        let (short, cancelled, long) = (
            transfer("http://127.0.0.1:8080/a", timeout: .milliseconds(50)), transfer("http://127.0.0.1:8080/b"),
            transfer("http://127.0.0.1:8080/c")
        )
        for each in [short, cancelled, long] { queue.wait(each, host: host) }
        cancelled.finish(.failure(HTTPClientError(kind: .cancelled, reason: "cancelled")))
        let gone = queue.expired(at: .now + .seconds(1)).map(\.transfer)
        #expect(gone.count == 2 && gone[0] === short && gone[1] === cancelled)
        queue.ended(host, on: 0, httpVersion: nil)
        #expect(queue.next()?.0.transfer === long)
    }
}
