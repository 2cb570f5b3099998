import Foundation
import NIOCore
import NIOPosix

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file opened for a transfer, read and written off the cooperative thread pool.
///
/// Every system call runs on SwiftNIO's blocking-I/O thread pool: a disk that stalls must not
/// stall the tasks that serve other requests. Calls are made per chunk of
/// ``FileIO/chunkSize`` bytes so a transfer costs few thread hops and holds little memory.
final class TransferFile: Sendable {
    let path: String
    private let descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// Opens an existing file for reading.
    static func openForReading(_ path: String) async throws -> TransferFile {
        try await FileIO.blocking {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw FileIO.failure(path, "open") }
            return TransferFile(path: path, descriptor: descriptor)
        }
    }

    /// Opens a file for writing and cuts it to `length` bytes: what follows a resume point is
    /// never kept.
    ///
    /// With `length` 0 the file is made anew, readable by its owner alone (0600), and only if
    /// nothing is at `path` once any old file is removed (`O_EXCL`): a link planted there by
    /// someone else cannot redirect the bytes. A file resumed from is opened without following
    /// a link (`O_NOFOLLOW`) and must be a regular file.
    static func openForWriting(_ path: String, keeping length: Int64) async throws -> TransferFile {
        try await FileIO.blocking {
            let descriptor: Int32
            if length == 0 {
                if unlink(path) != 0, errno != ENOENT { throw FileIO.failure(path, "remove") }
                descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            } else {
                descriptor = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard descriptor >= 0 else { throw FileIO.failure(path, "open") }
            let file = TransferFile(path: path, descriptor: descriptor)
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw TrellisError.fileFailed(FileFailure(path: path, operation: "open", reason: "it is not a regular file"))
            }
            guard ftruncate(descriptor, off_t(length)) == 0 else { throw FileIO.failure(path, "truncate") }
            return file
        }
    }

    /// Up to `count` bytes from `offset`; fewer only at the end of the file.
    func read(at offset: Int64, count: Int) async throws -> ByteBuffer {
        try await FileIO.blocking { [descriptor, path] in
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            var filled = 0
            while filled < count {
                let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - filled) { pointer in
                    pread(descriptor, pointer.baseAddress, count - filled, off_t(offset) + off_t(filled))
                }
                if read < 0 {
                    if errno == EINTR { continue }
                    throw FileIO.failure(path, "read")
                }
                if read == 0 { break }
                filled += read
            }
            return buffer
        }
    }

    /// Writes all of `buffers`, one after the other, from `offset`; returns the bytes written.
    /// One trip to the thread pool for the lot.
    @discardableResult
    func write(_ buffers: [ByteBuffer], at offset: Int64) async throws -> Int64 {
        try await FileIO.blocking { [descriptor, path] in
            var position = offset
            for buffer in buffers {
                var written = 0
                let total = buffer.readableBytes
                while written < total {
                    // Not a race when ThreadSanitizer pairs this read with SwiftNIO reusing
                    // the buffer: see Scripts/thread-sanitizer-suppressions.
                    let result = buffer.withUnsafeReadableBytes { bytes in
                        pwrite(descriptor, bytes.baseAddress! + written, total - written, off_t(position) + off_t(written))
                    }
                    if result < 0 {
                        if errno == EINTR { continue }
                        throw FileIO.failure(path, "write")
                    }
                    written += result
                }
                position += Int64(total)
            }
            return position - offset
        }
    }
}

enum FileIO {
    /// How much a transfer reads from or writes to disk at a time.
    static let chunkSize = 1024 * 1024

    static func blocking<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await NIOThreadPool.singleton.runIfActive(body)
    }

    static func failure(_ path: String, _ operation: String, code: Int32 = errno) -> TrellisError {
        TrellisError.fileFailed(FileFailure(path: path, operation: operation, reason: String(cString: strerror(code))))
    }

    /// The size of a regular file, or a ``TrellisError/fileFailed(_:)`` naming what is wrong.
    static func sizeOfFile(_ path: String) throws -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0 else { throw failure(path, "read") }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw TrellisError.fileFailed(FileFailure(path: path, operation: "read", reason: "it is not a regular file"))
        }
        return Int64(info.st_size)
    }

    /// The size of a file, or `nil` when there is none.
    static func existingSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// Replaces `destination` with `source` in one step: readers see the old file or the new
    /// one, never a part.
    static func moveIntoPlace(_ source: String, _ destination: String) async throws {
        try await blocking {
            guard rename(source, destination) == 0 else { throw failure(destination, "move into place") }
        }
    }

    static func remove(_ path: String) {
        unlink(path)
    }

    /// Replaces the file at `path` with `data` in one step: written whole to a new file beside
    /// it, readable by its owner alone (0600), flushed to disk, then renamed over it. A crash
    /// or a concurrent writer leaves the old file or a new one, never a part of one.
    static func replaceAtomically(_ path: String, with data: Data) throws {
        let temporary = path + ".trellis-\(UUID().uuidString)"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure(temporary, "create") }
        let written = data.withUnsafeBytes { bytes -> Bool in
            guard let base = bytes.baseAddress else { return true }
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, base + offset, bytes.count - offset)
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        let synced = written && fsync(descriptor) == 0
        close(descriptor)
        guard synced, rename(temporary, path) == 0 else {
            let error = failure(path, "write")
            unlink(temporary)
            throw error
        }
    }

    /// The chunks of a file's bytes in `range`, read as the transport asks for them.
    static func chunks(of path: String, in range: Range<Int64>) -> ChunkIterator {
        var file: TransferFile?
        var offset = range.lowerBound
        return ChunkIterator {
            guard offset < range.upperBound else { return nil }
            let opened: TransferFile
            if let file {
                opened = file
            } else {
                opened = try await TransferFile.openForReading(path)
                file = opened
            }
            let count = Int(min(Int64(chunkSize), range.upperBound - offset))
            let chunk = try await opened.read(at: offset, count: count)
            guard chunk.readableBytes == count else {
                throw TrellisError.fileFailed(FileFailure(path: path, operation: "read", reason: "the file became shorter while it was being sent"))
            }
            offset += Int64(count)
            return chunk
        }
    }
}

extension RequestBody {
    /// A body streamed from a file on disk, with its length known in advance so it is sent
    /// with `Content-Length`. The file is read a chunk at a time, so memory stays constant
    /// whatever its size; it is read afresh if the request is sent again.
    ///
    /// - Parameters:
    ///   - url: the file to send.
    ///   - contentType: defaults to the type of the file's extension, from a fixed table
    ///     (`application/octet-stream` for one it does not know).
    /// - Throws: ``TrellisError/fileFailed(_:)`` when there is no readable regular file at `url`.
    public init(fileAt url: URL, contentType: String? = nil) throws {
        let path = url.path
        let size = try FileIO.sizeOfFile(path)
        self.init(
            storage: .replayableStream { FileIO.chunks(of: path, in: 0..<size) },
            length: size,
            contentType: contentType ?? MIMEType.forFileName(path)
        )
    }
}
