import NIOCore

/// Writes received chunks to a file in batches, one batch in flight while the next fills.
struct BatchedWriter: Sendable {
    let file: TransferFile
    /// Bytes whose writes have completed: where the next batch goes.
    private(set) var written: Int64
    private var inFlight: Task<Int64, any Error>?
    private var batch: [ByteBuffer] = []
    private var batchBytes = 0

    init(file: TransferFile, written: Int64) {
        self.file = file
        self.written = written
    }

    mutating func append(_ chunk: ByteBuffer) async throws {
        batch.append(chunk)
        batchBytes += chunk.readableBytes
        if batchBytes >= FileIO.chunkSize {
            try await startWrite()
        }
    }

    /// Writes what is left and returns the file's length.
    mutating func finish() async throws -> Int64 {
        try await startWrite()
        try await awaitInFlight()
        return written
    }

    private mutating func awaitInFlight() async throws {
        guard let inFlight else { return }
        self.inFlight = nil
        written += try await inFlight.value
    }

    private mutating func startWrite() async throws {
        try await awaitInFlight()
        guard batchBytes > 0 else { return }
        let (buffers, offset, file) = (batch, written, file)
        inFlight = Task { try await file.write(buffers, at: offset) }
        batch.removeAll(keepingCapacity: true)
        batchBytes = 0
    }
}
