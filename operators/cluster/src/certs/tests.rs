use super::*;
use std::collections::BTreeMap;
use x509_parser::pem::parse_x509_pem;

fn names() -> ClusterName {
    ClusterName::new("db", "main").with_tls(true, true)
}

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

fn data(cert: &str, key: &str, ca: &str) -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        ("tls.crt".to_owned(), cert.as_bytes().to_vec()),
        ("tls.key".to_owned(), key.as_bytes().to_vec()),
        ("ca.crt".to_owned(), ca.as_bytes().to_vec()),
    ])
}

/// (DNS SANs, IP SANs, serverAuth, clientAuth, notBefore, notAfter, is CA) of a PEM certificate.
struct Seen {
    dns: Vec<String>,
    ips: Vec<Vec<u8>>,
    server_auth: bool,
    client_auth: bool,
    not_before: i64,
    not_after: i64,
    ca: bool,
}

fn seen(pem: &str) -> Seen {
    let (_, pem) = parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let mut dns = vec![];
    let mut ips = vec![];
    if let Some(san) = cert.subject_alternative_name().unwrap() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns.push((*d).to_owned()),
                GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
    }
    let (server_auth, client_auth) = cert
        .extended_key_usage()
        .unwrap()
        .map_or((false, false), |e| {
            (e.value.server_auth, e.value.client_auth)
        });
    Seen {
        dns,
        ips,
        server_auth,
        client_auth,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        ca: cert.is_ca(),
    }
}

#[test]
fn member_certificate_has_the_sans_usages_and_validity_members_need() {
    let ca = new_ca(&names(), now()).unwrap();
    let member = issue_member(&ca, &names(), "main-2", now(), LEAF_VALIDITY).unwrap();
    let s = seen(&member.cert_pem);
    assert_eq!(
        s.dns,
        [
            "main-2.main.db.svc",
            "main-2.main.db.svc.cluster.local",
            "main-2.main.db",
            "main-2.main",
            "main.db.svc",
            "main-client",
            "main-client.db",
            "main-client.db.svc",
            "main-client.db.svc.cluster.local",
            "localhost",
        ]
    );
    assert_eq!(
        s.ips,
        [vec![127, 0, 0, 1], {
            let mut v6 = vec![0; 16];
            v6[15] = 1;
            v6
        }]
    );
    assert!(s.server_auth && s.client_auth);
    assert!(!s.ca);
    let t = now().unix_timestamp();
    assert_eq!(s.not_before, t - 3600);
    assert_eq!(s.not_after, t + 3 * 365 * 86400);
    // What the operator checks before members use it, as peer and as client server.
    let member_names: Vec<String> = ["main-0", "main-1", "main-2"]
        .iter()
        .map(|m| names().member_host(m))
        .collect();
    let secret = data(&member.cert_pem, &member.key_pem, &ca.cert_pem);
    // Issued for main-2 only: it covers main-2 and no other member.
    assert_eq!(
        check_secret(&secret, &Use::Peer(member_names.clone()), now()),
        [
            CertProblem::MissingSan {
                name: "main-0.main.db.svc".into()
            },
            CertProblem::MissingSan {
                name: "main-1.main.db.svc".into()
            },
        ]
    );
    let own = vec![names().member_host("main-2")];
    assert_eq!(check_secret(&secret, &Use::Peer(own.clone()), now()), []);
    assert_eq!(check_secret(&secret, &Use::ClientServing(own), now()), []);
}

#[test]
fn operator_client_certificate_is_for_client_auth_only() {
    let ca = new_ca(&names(), now()).unwrap();
    let client = issue_operator_client(&ca, &names(), now(), LEAF_VALIDITY).unwrap();
    let s = seen(&client.cert_pem);
    assert!(s.client_auth && !s.server_auth);
    assert!(s.dns.is_empty() && s.ips.is_empty());
    let secret = data(&client.cert_pem, &client.key_pem, &ca.cert_pem);
    assert_eq!(check_secret(&secret, &Use::OperatorClient, now()), []);
    // It cannot serve members.
    assert_eq!(
        check_secret(
            &secret,
            &Use::Peer(vec!["main-0.main.db.svc".into()]),
            now()
        ),
        [
            CertProblem::MissingUsage {
                usage: "serverAuth"
            },
            CertProblem::MissingSan {
                name: "main-0.main.db.svc".into()
            },
        ]
    );
}

#[test]
fn ca_is_a_ca_for_ten_years() {
    let ca = new_ca(&names(), now()).unwrap();
    let s = seen(&ca.cert_pem);
    assert!(s.ca);
    assert_eq!(s.not_after, now().unix_timestamp() + 3650 * 86400);
    let secret = BTreeMap::from([
        ("tls.crt".to_owned(), ca.cert_pem.as_bytes().to_vec()),
        ("tls.key".to_owned(), ca.key_pem.as_bytes().to_vec()),
    ]);
    assert_eq!(check_secret(&secret, &Use::ManagedCa, now()), []);
    let member = issue_member(&ca, &names(), "main-0", now(), LEAF_VALIDITY).unwrap();
    let not_a_ca = BTreeMap::from([
        ("tls.crt".to_owned(), member.cert_pem.as_bytes().to_vec()),
        ("tls.key".to_owned(), member.key_pem.as_bytes().to_vec()),
    ]);
    assert_eq!(
        check_secret(&not_a_ca, &Use::ManagedCa, now()),
        [CertProblem::NotCa]
    );
}

#[test]
fn bad_secrets_are_refused_with_the_problem() {
    let ca = new_ca(&names(), now()).unwrap();
    let member = issue_member(&ca, &names(), "main-0", now(), LEAF_VALIDITY).unwrap();
    let other = issue_member(&ca, &names(), "main-1", now(), LEAF_VALIDITY).unwrap();
    let own = Use::Peer(vec![names().member_host("main-0")]);

    // Keys missing.
    assert_eq!(
        check_secret(&BTreeMap::new(), &own, now()),
        [
            CertProblem::MissingKey { key: "ca.crt" },
            CertProblem::MissingKey { key: "tls.crt" },
            CertProblem::MissingKey { key: "tls.key" },
        ]
    );
    // A certificate that does not parse.
    let garbage = data("not a certificate", &member.key_pem, &ca.cert_pem);
    assert!(matches!(
        check_secret(&garbage, &own, now()).as_slice(),
        [CertProblem::Unparsable { key: "tls.crt", .. }]
    ));
    let mangled = member.cert_pem.replace("MII", "MIX");
    assert!(matches!(
        check_secret(&data(&mangled, &member.key_pem, &ca.cert_pem), &own, now()).as_slice(),
        [CertProblem::Unparsable { key: "tls.crt", .. }]
    ));
    // A key that does not parse, and another certificate's key.
    assert!(matches!(
        check_secret(
            &data(&member.cert_pem, "garbage", &ca.cert_pem),
            &own,
            now()
        )
        .as_slice(),
        [CertProblem::KeyUnparsable { .. }]
    ));
    assert_eq!(
        check_secret(
            &data(&member.cert_pem, &other.key_pem, &ca.cert_pem),
            &own,
            now()
        ),
        [CertProblem::KeyMismatch]
    );
    // Expired, and not yet valid.
    let old = issue_member(
        &ca,
        &names(),
        "main-0",
        now() - Duration::days(4 * 365),
        LEAF_VALIDITY,
    )
    .unwrap();
    assert_eq!(
        check_secret(
            &data(&old.cert_pem, &old.key_pem, &ca.cert_pem),
            &own,
            now()
        ),
        [CertProblem::Expired {
            key: "tls.crt",
            not_after: "2026-01-15T08:00:00Z".into()
        }]
    );
    let early = issue_member(
        &ca,
        &names(),
        "main-0",
        now() + Duration::days(2),
        LEAF_VALIDITY,
    )
    .unwrap();
    assert!(matches!(
        check_secret(
            &data(&early.cert_pem, &early.key_pem, &ca.cert_pem),
            &own,
            now()
        )
        .as_slice(),
        [CertProblem::NotYetValid { key: "tls.crt", .. }]
    ));
    // Signed by another CA.
    let stranger = new_ca(&names(), now()).unwrap();
    assert_eq!(
        check_secret(
            &data(&member.cert_pem, &member.key_pem, &stranger.cert_pem),
            &own,
            now()
        ),
        [CertProblem::NotSignedByCa]
    );
    // An expired CA.
    let old_ca = new_ca(&names(), now() - Duration::days(3700)).unwrap();
    let by_old = issue_member(&old_ca, &names(), "main-0", now(), LEAF_VALIDITY).unwrap();
    assert!(matches!(
        check_secret(
            &data(&by_old.cert_pem, &by_old.key_pem, &old_ca.cert_pem),
            &own,
            now()
        )
        .as_slice(),
        [CertProblem::Expired { key: "ca.crt", .. }]
    ));
}

#[test]
fn a_wildcard_covers_every_member() {
    // A certificate you provide for all members: `*.main.db.svc`.
    let ca = new_ca(&names(), now()).unwrap();
    let mut params = CertificateParams::new(vec!["*.main.db.svc".to_owned()]).unwrap();
    params.not_before = now() - Duration::days(1);
    params.not_after = now() + Duration::days(30);
    let issued = leaf(&ca, params, params_usages(), "wildcard").unwrap();
    let members: Vec<String> = (0..5)
        .map(|i| names().member_host(&format!("main-{i}")))
        .collect();
    assert_eq!(
        check_secret(
            &data(&issued.cert_pem, &issued.key_pem, &ca.cert_pem),
            &Use::Peer(members),
            now()
        ),
        []
    );
}

fn params_usages() -> Vec<ExtendedKeyUsagePurpose> {
    vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ]
}

#[test]
fn wildcards_match_one_label() {
    for (pattern, name, matches) in [
        ("a.b.svc", "a.b.svc", true),
        ("A.b.svc", "a.B.svc", true),
        ("*.b.svc", "a.b.svc", true),
        ("*.b.svc", "x.a.b.svc", false),
        ("*.b.svc", "b.svc", false),
        ("*.b.svc", ".b.svc", false),
        ("a.b.svc", "c.b.svc", false),
    ] {
        assert_eq!(dns_matches(pattern, name), matches, "{pattern} {name}");
    }
}

/// Renewal at a third of the lifetime left (cert-manager's default), for the default lifetime
/// and for the short one the e2e test runs with (whose clock-skew margin shrinks with it).
#[test]
fn renewal_is_due_once_a_third_of_the_lifetime_is_left() {
    let ca = new_ca(&names(), now()).unwrap();
    let cases: [(Duration, Duration, bool); 8] = [
        // (validity, time since issuance, due)
        (LEAF_VALIDITY, Duration::ZERO, false),
        (LEAF_VALIDITY, Duration::days(365), false),
        (LEAF_VALIDITY, Duration::days(2 * 365 - 1), false),
        (LEAF_VALIDITY, Duration::days(2 * 365 + 1), true),
        (LEAF_VALIDITY, Duration::days(4 * 365), true), // expired
        (Duration::seconds(120), Duration::seconds(60), false),
        // lifetime 132 s (12 s of skew margin): due at 88 s after notBefore, 76 s after issuance
        (Duration::seconds(120), Duration::seconds(75), false),
        (Duration::seconds(120), Duration::seconds(77), true),
    ];
    for (validity, age, due) in cases {
        let member = issue_member(&ca, &names(), "main-0", now(), validity).unwrap();
        assert_eq!(
            renewal_due(&member.cert_pem, now() + age),
            due,
            "validity {validity}, age {age}"
        );
    }
    assert!(renewal_due("not a certificate", now()), "unreadable: renew");
}

/// When to look again: the earliest renewal time still ahead, from notBefore/notAfter alone.
#[test]
fn the_next_renewal_is_the_earliest_one_still_ahead() {
    let ca = new_ca(&names(), now()).unwrap();
    let issued = |at: OffsetDateTime, validity: Duration| {
        issue_member(&ca, &names(), "main-0", at, validity)
            .unwrap()
            .cert_pem
    };
    // 3-year lifetime plus an hour of skew margin: due two thirds in, counted from notBefore.
    let long = issued(now(), LEAF_VALIDITY);
    let lifetime = LEAF_VALIDITY + CLOCK_SKEW;
    let long_due = now() - CLOCK_SKEW + lifetime - lifetime / 3;
    assert_eq!(renewal_time(&long), Some(long_due));
    // 90 s plus 9 s of margin: due at 66 s after notBefore, 57 s after issuance.
    let short = issued(now(), Duration::seconds(90));
    let short_due = now() + Duration::seconds(57);
    assert_eq!(renewal_time(&short), Some(short_due));
    assert_eq!(renewal_time("not a certificate"), None);

    let cases: [(&[&str], OffsetDateTime, Option<OffsetDateTime>); 6] = [
        (&[], now(), None),
        (&[&long], now(), Some(long_due)),
        (&[&long, &short], now(), Some(short_due)),
        (&[&short, &long], now(), Some(short_due)),
        // The short one is due already (re-issued this pass, or waiting for a step of its
        // own): the long one says when to look next.
        (&[&short, &long], short_due, Some(long_due)),
        // Unreadable ones are re-issued as they are found; they set no time.
        (&["not a certificate", &long], now(), Some(long_due)),
    ];
    for (i, (pems, at, expected)) in cases.into_iter().enumerate() {
        assert_eq!(next_renewal(pems.iter().copied(), at), expected, "case {i}");
    }
}

#[test]
fn signed_by_tells_which_ca_issued_a_certificate() {
    let ca = new_ca(&names(), now()).unwrap();
    let other = new_ca(&names(), now()).unwrap();
    let member = issue_member(&ca, &names(), "main-0", now(), LEAF_VALIDITY).unwrap();
    assert!(signed_by(&member.cert_pem, &ca.cert_pem));
    assert!(!signed_by(&member.cert_pem, &other.cert_pem));
    assert!(!signed_by("garbage", &ca.cert_pem));
}

/// Certificates the operator does not issue: warned about with a sixth of their lifetime left
/// (after cert-manager's renewal at a third had half its window), at most 7 days ahead.
#[test]
fn a_certificate_not_ours_is_reported_near_its_end_at_a_sixth_of_its_lifetime_or_7_days() {
    let ca = new_ca(&names(), now()).unwrap();
    let cases: [(Duration, Duration, bool); 8] = [
        // (validity, time since issuance, near its end)
        // 90 days (cert-manager's default) + 1 h skew margin: 7 days ahead (a sixth is 15).
        (Duration::days(90), Duration::days(60), false), // cert-manager renews about now
        (Duration::days(90), Duration::days(82), false),
        (
            Duration::days(90),
            Duration::days(83) + Duration::hours(2),
            true,
        ),
        (Duration::days(90), Duration::days(91), true), // expired
        // A year by hand: 7 days ahead, not two months.
        (Duration::days(365), Duration::days(300), false),
        (Duration::days(365), Duration::days(359), true),
        // A day (short-lived issuer): a sixth of 25 h, about 4 h ahead, never at once.
        (Duration::hours(24), Duration::hours(1), false),
        (Duration::hours(24), Duration::hours(20), true),
    ];
    for (validity, age, near) in cases {
        let member = issue_member(&ca, &names(), "main-0", now(), validity).unwrap();
        let expiry = expiry_warning_time(&member.cert_pem).unwrap();
        assert_eq!(
            expiry.near(now() + age),
            near,
            "validity {validity}, age {age}: {expiry:?}"
        );
        assert!(expiry.warn_from < expiry.not_after);
        assert!(expiry.not_after - expiry.warn_from <= EXPIRY_WARNING_AT_MOST);
    }
    assert_eq!(expiry_warning_time("not a certificate"), None);
}
