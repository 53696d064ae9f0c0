use k8s_pb::api::policy::v1::Eviction;

use crate::go_json::json_table;

json_table! {
    Eviction {
        metadata: always "metadata",
        delete_options: ptr "deleteOptions",
    }
}
