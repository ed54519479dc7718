//! The S3 front end.
#[derive(Clone)]
pub struct Front;
#[async_trait::async_trait]
impl s3s::S3 for Front {}
pub fn service() -> s3s::service::S3Service {
    s3s::service::S3ServiceBuilder::new(Front).build()
}
