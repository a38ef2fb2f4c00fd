"""Client certificates carry the Kubernetes identity: CN = user, O = groups."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tools.controlplane.pki import CertificateAuthority


def test_client_certificate_names_user_and_groups_and_is_signed_by_the_ca() -> None:
    ca = CertificateAuthority()
    pair = ca.issue_client("alice", ("system:masters", "devs"))
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters", "devs"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))


def test_serving_certificate_has_ip_and_dns_sans() -> None:
    cert = x509.load_pem_x509_certificate(CertificateAuthority().issue_server(["localhost", "127.0.0.1"]).cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
