public import Foundation

/// A value a `@FileUpload` endpoint sends as its file when it is neither `Data` nor a file
/// `URL`: an image, a document, anything that can give its bytes.
///
/// Snowdrop's README uploads a `UIImage`; with Trellis, conform a type of your own (a
/// `UIImage` is not `Sendable`, so wrap the encoded image):
///
/// ```swift
/// struct JPEGImage: UploadableFile {
///     let jpeg: Data
///     func uploadData() throws -> Data { jpeg }
///     var uploadMIMEType: String? { "image/jpeg" }
///     var uploadFileName: String? { "photo.jpeg" }
/// }
///
/// @POST("/uploadAvatar/")
/// @FileUpload
/// @Body("image")
/// func uploadImage(_ image: JPEGImage) async throws -> Data
/// ```
///
/// A call's payload description, when given, names the field and the file instead.
public protocol UploadableFile: Sendable {
    /// The bytes to send; an error thrown here fails the call before anything is sent.
    func uploadData() throws -> Data
    /// The media type; when `nil`, the type of the file name's extension, else
    /// `application/octet-stream`.
    var uploadMIMEType: String? { get }
    /// The file name the server sees; when `nil`, the parameter's name.
    var uploadFileName: String? { get }
}

extension UploadableFile {
    public var uploadMIMEType: String? { nil }
    public var uploadFileName: String? { nil }
}
