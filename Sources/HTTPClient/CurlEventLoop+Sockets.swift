import CCurl
import CLinux

/// The sockets libcurl asks the loop to watch, registered with epoll on the loop's thread.
extension CurlEventLoop {
    /// libcurl's socket callback for `shard`'s handle: watch `socket` for what it needs, or stop watching it (it
    /// goes dormant).
    func watch(_ socket: curl_socket_t, what: Int32, shard: Int) {
        if what == CURL_POLL_REMOVE {
            // Read and written back: a change through the optional subscript allocated its accessor's frame.
            if let entry = registered[socket] { registered[socket] = (entry.shard, false) }
            return
        }
        var event = epoll_event()
        event.events =
            (what & CURL_POLL_IN != 0 ? EPOLLIN.rawValue : 0) | (what & CURL_POLL_OUT != 0 ? EPOLLOUT.rawValue : 0)
        event.data.fd = socket
        let known = registered[socket] != nil
        if epoll_ctl(epoll, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket, &event) != 0 {
            // A socket libcurl closed (which took it out of epoll) and whose number a new one took: the other
            // operation fits.
            epoll_ctl(epoll, known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event)
        }
        registered[socket] = (shard, true)
    }

    /// An event on a socket libcurl does not watch now (an idle connection closed by the server, say): taken
    /// out of epoll, or level-triggered epoll would report it on every turn.
    func isDormant(_ socket: curl_socket_t) -> Bool {
        guard registered[socket]?.watching == false else { return false }
        registered[socket] = nil
        epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil)  // fails harmlessly when libcurl already closed it
        return true
    }
}
