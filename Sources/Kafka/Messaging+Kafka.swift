// The messages this client reads and writes are the flows' own values (``Messaging``): whoever uses the client
// has them too.
@_exported import Messaging

extension KafkaProducer: MessageSender {}
