"""An in-memory S3 with the few client calls opendlc.checkpoint makes, failing as boto3
does (botocore ClientError with S3's error codes)."""

from __future__ import annotations

import io
from typing import Any, Dict, List, Optional

from botocore.exceptions import ClientError


def _error(code: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, op)


class FakeS3:
    def __init__(self, buckets: List[str], page_size: int = 3) -> None:
        self.objects: Dict[str, Dict[str, bytes]] = {b: {} for b in buckets}
        self.page_size = page_size  # small, so that listings paginate
        self.largest_read = 0  # the most bytes upload_fileobj asked for in one read
        self.puts: List[str] = []  # keys in the order they were written
        self.fail_on: Optional[str] = None  # a key whose upload fails

    def _bucket(self, bucket: str, op: str) -> Dict[str, bytes]:
        if bucket not in self.objects:
            raise _error("NoSuchBucket", op)
        return self.objects[bucket]

    def upload_fileobj(self, Fileobj: Any, Bucket: str, Key: str, Config: Any = None) -> None:
        objs = self._bucket(Bucket, "PutObject")
        if Key == self.fail_on:
            raise _error("InternalError", "PutObject")
        chunk = Config.multipart_chunksize if Config is not None else 8 << 20
        assert not Fileobj.seekable(), "the uploader must be handed a sequential stream"
        buf = bytearray()
        while True:
            b = Fileobj.read(chunk)
            self.largest_read = max(self.largest_read, len(b))
            if not b:
                break
            buf += b
        objs[Key] = bytes(buf)
        self.puts.append(Key)

    def put_object(self, Bucket: str, Key: str, Body: bytes, ContentType: str = "") -> Dict[str, Any]:
        self._bucket(Bucket, "PutObject")[Key] = bytes(Body)
        self.puts.append(Key)
        return {}

    def get_object(self, Bucket: str, Key: str) -> Dict[str, Any]:
        objs = self._bucket(Bucket, "GetObject")
        if Key not in objs:
            raise _error("NoSuchKey", "GetObject")
        return {"Body": io.BytesIO(objs[Key])}

    def delete_object(self, Bucket: str, Key: str) -> Dict[str, Any]:
        self._bucket(Bucket, "DeleteObject").pop(Key, None)
        return {}

    def delete_objects(self, Bucket: str, Delete: Dict[str, Any]) -> Dict[str, Any]:
        objs = self._bucket(Bucket, "DeleteObjects")
        for o in Delete["Objects"]:
            objs.pop(o["Key"], None)
        return {}

    def list_objects_v2(self, Bucket: str, Prefix: str = "", ContinuationToken: str = "") -> Dict[str, Any]:
        keys = sorted(k for k in self._bucket(Bucket, "ListObjectsV2") if k.startswith(Prefix))
        start = int(ContinuationToken or 0)
        page = keys[start:start + self.page_size]
        out: Dict[str, Any] = {"IsTruncated": start + self.page_size < len(keys)}
        if page:
            out["Contents"] = [{"Key": k} for k in page]
        if out["IsTruncated"]:
            out["NextContinuationToken"] = str(start + self.page_size)
        return out

    def keys(self, bucket: str, prefix: str = "") -> List[str]:
        return sorted(k[len(prefix):] for k in self.objects[bucket] if k.startswith(prefix))
