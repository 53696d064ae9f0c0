//! The hickory-server request handler: turns an [`Outcome`] into a DNS message (authoritative,
//! SOA in negative answers, EDNS echoed so the client's buffer size is honoured) and forwards
//! names outside the zone. hickory-server frames UDP and TCP and truncates UDP answers that do
//! not fit the client's buffer (512 bytes without EDNS), setting TC so the client retries on TCP.

use std::net::SocketAddr;

use hickory_proto::op::{
    Edns, Header, HeaderCounts, Message, MessageType, Metadata, OpCode, ResponseCode,
};
use hickory_proto::rr::{Name, Record, RecordType};
use hickory_server::net::runtime::Time;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;

use super::answer::{Outcome, Snapshot, Zone, answer, soa};
use super::upstream;
use crate::cluster::DnsCache;

pub struct ClusterDns {
    pub zone: Zone,
    pub cache: DnsCache,
    pub upstream: Option<SocketAddr>,
}

/// A message ready to send: header flags and the three record sections.
struct Reply {
    code: ResponseCode,
    authoritative: bool,
    recursion_available: bool,
    answers: Vec<Record>,
    authorities: Vec<Record>,
    additionals: Vec<Record>,
}

impl Reply {
    fn error(code: ResponseCode) -> Reply {
        Reply {
            code,
            authoritative: false,
            recursion_available: false,
            answers: Vec::new(),
            authorities: Vec::new(),
            additionals: Vec::new(),
        }
    }

    /// The upstream's answer relayed as is (its flags, its sections).
    fn relayed(message: Message) -> Reply {
        Reply {
            code: message.metadata.response_code,
            authoritative: message.metadata.authoritative,
            recursion_available: message.metadata.recursion_available,
            answers: message.answers,
            authorities: message.authorities,
            additionals: message.additionals,
        }
    }
}

#[async_trait::async_trait]
impl RequestHandler for ClusterDns {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let edns = request.edns.as_ref().map(|requested| {
            let mut edns = Edns::new();
            edns.set_max_payload(requested.max_payload().max(512));
            edns.set_version(0);
            edns
        });
        let reply = self.reply(request).await;

        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.response_code = reply.code;
        metadata.authoritative = reply.authoritative;
        metadata.recursion_available = reply.recursion_available;
        let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
            metadata,
            reply.answers.iter(),
            reply.authorities.iter(),
            std::iter::empty(),
            reply.additionals.iter(),
        );
        match response_handle.send_response(response).await {
            Ok(info) => info,
            Err(error) => {
                tracing::debug!(src = %request.src(), %error, "cannot send DNS response");
                let mut metadata = Metadata::response_from_request(&request.metadata);
                metadata.response_code = ResponseCode::ServFail;
                ResponseInfo::from(Header {
                    metadata,
                    counts: HeaderCounts::default(),
                })
            }
        }
    }
}

impl ClusterDns {
    async fn reply(&self, request: &Request) -> Reply {
        if request.metadata.message_type != MessageType::Query {
            return Reply::error(ResponseCode::FormErr);
        }
        if request.metadata.op_code != OpCode::Query {
            return Reply::error(ResponseCode::NotImp);
        }
        if request.edns.as_ref().is_some_and(|edns| edns.version() > 0) {
            return Reply::error(ResponseCode::BADVERS);
        }
        let Ok(info) = request.request_info() else {
            // Not exactly one question.
            return Reply::error(ResponseCode::FormErr);
        };
        let qname = info.query.original().name();
        let qtype = info.query.query_type();
        if self.zone.origin.zone_of(qname) {
            let snapshot = Snapshot {
                view: &self.cache,
                synced: self.cache.synced(),
                serial: self.cache.serial(),
            };
            let outcome = answer(&self.zone, qname, qtype, &snapshot);
            return self.authoritative(outcome, qtype, snapshot.serial).await;
        }
        match self.upstream {
            None => Reply::error(ResponseCode::Refused),
            Some(upstream) => match upstream::exchange(upstream, request.as_slice()).await {
                Some(message) => Reply::relayed(message),
                None => Reply::error(ResponseCode::ServFail),
            },
        }
    }

    async fn authoritative(&self, outcome: Outcome, qtype: RecordType, serial: u32) -> Reply {
        let negative = |code| Reply {
            code,
            authoritative: true,
            recursion_available: false,
            answers: Vec::new(),
            authorities: vec![soa(&self.zone, serial)],
            additionals: Vec::new(),
        };
        match outcome {
            Outcome::Records {
                answers,
                additionals,
            } => Reply {
                code: ResponseCode::NoError,
                authoritative: true,
                recursion_available: false,
                answers,
                authorities: Vec::new(),
                additionals,
            },
            Outcome::Chase { cname, target } => match self.chase(target, qtype).await {
                Some(mut answers) => {
                    answers.insert(0, *cname);
                    Reply {
                        code: ResponseCode::NoError,
                        authoritative: true,
                        recursion_available: false,
                        answers,
                        authorities: Vec::new(),
                        additionals: Vec::new(),
                    }
                }
                None => negative(ResponseCode::NoError),
            },
            Outcome::NoData => negative(ResponseCode::NoError),
            Outcome::NxDomain => negative(ResponseCode::NXDomain),
            Outcome::ServFail => Reply::error(ResponseCode::ServFail),
            Outcome::Refused => Reply::error(ResponseCode::Refused),
        }
    }

    /// The upstream's records for an ExternalName target, `None` when it has none.
    async fn chase(&self, target: Name, qtype: RecordType) -> Option<Vec<Record>> {
        let message = upstream::lookup(self.upstream?, target, qtype).await?;
        (message.metadata.response_code == ResponseCode::NoError && !message.answers.is_empty())
            .then_some(message.answers)
    }
}
