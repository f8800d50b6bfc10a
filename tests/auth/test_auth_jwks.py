"""Which published keys are kept, and which algorithms each may verify."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed448
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from workqueue.auth.jwks import RSA_ALGORITHMS, parse_key_set


def test_asymmetric_signature_keys_are_kept_with_their_algorithms(
    rsa_signing_key, ec_signing_key, ed_signing_key
):
    p384 = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP384R1()).public_key(), as_dict=True)
    ed448_key = OKPAlgorithm.to_jwk(ed448.Ed448PrivateKey.generate().public_key(), as_dict=True)
    keys = parse_key_set(
        {
            "keys": [
                rsa_signing_key.public_jwk(),
                ec_signing_key.public_jwk(),
                ed_signing_key.public_jwk(),
                {**p384, "kid": "p384"},
                {**ed448_key, "kid": "ed448"},
                rsa_signing_key.public_jwk(kid="rsa-pss", alg="PS384"),
            ]
        }
    )
    assert {kid: key.algorithms for kid, key in keys.items()} == {
        "rsa-1": RSA_ALGORITHMS,
        "ec-1": {"ES256"},
        "ed-1": {"EdDSA"},
        "p384": {"ES384"},
        "ed448": {"EdDSA"},
        "rsa-pss": {"PS384"},
    }


@pytest.mark.parametrize(
    ("description", "change"),
    [
        ("symmetric key", {"kty": "oct", "k": "c2VjcmV0"}),
        ("encryption key", {"use": "enc"}),
        ("key not for verifying", {"key_ops": ["encrypt"]}),
        ("declared alg of another family", {"alg": "HS256"}),
        ("declared alg none", {"alg": "none"}),
        ("no kid", {"kid": None}),
        ("unknown key type", {"kty": "XYZ"}),
        ("broken modulus", {"n": "!!"}),
    ],
)
def test_unusable_keys_are_skipped(rsa_signing_key, description, change):
    jwk = {**rsa_signing_key.public_jwk(), **change}
    jwk = {name: value for name, value in jwk.items() if value is not None}
    assert parse_key_set({"keys": [jwk]}) == {}


def test_keys_with_private_material_are_skipped(rsa_signing_key):
    private = RSAAlgorithm.to_jwk(rsa_signing_key.private_key, as_dict=True)
    assert parse_key_set({"keys": [{**private, "kid": "leaked"}]}) == {}


def test_a_kid_published_twice_is_ambiguous_and_dropped(rsa_signing_key, attacker_key):
    keys = parse_key_set(
        {
            "keys": [
                rsa_signing_key.public_jwk(),
                attacker_key.public_jwk(kid=rsa_signing_key.kid),
                attacker_key.public_jwk(),
            ]
        }
    )
    assert set(keys) == {attacker_key.kid}


@pytest.mark.parametrize("document", [None, [], {"keys": {}}, {"no": "keys"}, "keys"])
def test_a_document_that_is_not_a_key_set_is_an_error(document):
    with pytest.raises(TypeError):
        parse_key_set(document)
