import CCurl

/// One of the event loop's `CURLM` handles, with the connections only it holds.
///
/// For each new transfer libcurl (7.88, Debian 12's) looks for a connection to reuse by walking every
/// connection its multi handle holds to the host, reading each one's state; at the host's limit it walks them
/// again for one to close. Over HTTP/1.1 every request in flight holds a connection of its own, so with
/// hundreds in flight each request walked hundreds of cold structures: about 4 % of the worker's CPU, growing
/// with the load. The loop deals each transfer to the handle with the fewest in flight, each handle with a share of
/// the connections and of the per-host limit, so each walk is a share as long and no handle queues requests while
/// another has room. Over HTTP/2, as Apple speaks, each
/// handle multiplexes its requests on a connection of its own.
final class CurlMultiShard {
    let multi: UnsafeMutableRawPointer
    let index: Int
    /// When libcurl next needs time on this handle (its timer callback); used on the loop's thread only.
    var timerDeadline: ContinuousClock.Instant?
    private unowned(unsafe) let loop: CurlEventLoop

    /// The number of handles for a configuration: one per 64 connections allowed to a host (at most 8), so a
    /// client limited to a few (the trace exporter's) keeps one.
    static func count(for configuration: HTTPClient.Configuration) -> Int {
        let perHost = configuration.maxConnectionsPerHost
        return perHost == 0 ? 8 : max(1, min(8, perHost / 64))
    }

    /// Handle `index`'s share of `total` over `count` handles (at least 1 of a total that is not 0).
    static func share(_ total: Int, _ index: Int, _ count: Int) -> Int {
        guard total > 0 else { return 0 }
        return max(1, total / count + (index < total % count ? 1 : 0))
    }

    init(index: Int, of count: Int, configuration: HTTPClient.Configuration, loop: CurlEventLoop) {
        self.index = index
        self.loop = loop
        multi = curl_multi_init()!  // fails only when out of memory
        ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
        // Shares that add up to the whole: the first handles take one more each where it does not divide. 0 keeps
        // its meaning (libcurl's own cache size; no limit per host).
        ccurl_multi_setopt_long(
            multi, CURLMOPT_MAXCONNECTS, Self.share(configuration.connectionCacheSize, index, count))
        ccurl_multi_setopt_long(
            multi, CURLMOPT_MAX_HOST_CONNECTIONS, Self.share(configuration.maxConnectionsPerHost, index, count))
        let this = Unmanaged.passUnretained(self).toOpaque()  // the shard outlives its multi handle
        ccurl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, this)
        ccurl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, this)
        ccurl_multi_setopt_socketfunction(multi) { _, socket, what, shard, _ in
            let this = Unmanaged<CurlMultiShard>.fromOpaque(shard!).takeUnretainedValue()
            this.loop.watch(socket, what: what, shard: this.index)
            return 0
        }
        ccurl_multi_setopt_timerfunction(multi) { _, milliseconds, shard in
            let this = Unmanaged<CurlMultiShard>.fromOpaque(shard!).takeUnretainedValue()
            this.timerDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
            return 0
        }
    }
}
