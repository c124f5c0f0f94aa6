//! The codec of every dovetail.v1 service: prost's, except that a message that cannot be decoded
//! is `INVALID_ARGUMENT` (the sender's fault) rather than prost's `INTERNAL`, which would
//! claim a bug in the receiver.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// `ProstCodec` with undecodable messages refused as `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct Codec<T, U> {
    inner: ProstCodec<T, U>,
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self {
            inner: ProstCodec::default(),
            _pd: PhantomData,
        }
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.inner.decoder())
    }
}

/// The decoder of [`Codec`].
#[derive(Debug)]
pub struct StrictDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            if s.code() == Code::Internal {
                Status::invalid_argument(format!("undecodable message: {}", s.message()))
            } else {
                s
            }
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
