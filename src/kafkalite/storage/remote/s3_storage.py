"""S3RemoteStorageManager: the remote tier in an S3 bucket (or any S3-compatible server) through boto3, with
endpoint, region, credentials, path-style access, multipart upload of large segments and retries with backoff.

Objects: <prefix><topic>-<partition>-<topic id>/<start offset>-<segment id>.<log|index|...>; the `.log` is
written last (a multipart upload is invisible until completed, and aborted on failure); deletion removes every
object of the segment and aborts its unfinished uploads (a broker killed mid-upload leaves one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkalite.storage.remote.storage_manager import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFound,
    RemoteStorageError,
)

log = logging.getLogger("kafkalite.storage.remote")

_MIN_PART = 5 * 1024 * 1024  # S3's smallest part but the last


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where and how to reach the bucket (Aiven's rsm.config.storage.s3.* names map onto these)."""

    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    path_style: bool = False
    prefix: str = ""
    part_size: int = 25 * 1024 * 1024  # Aiven's storage.s3.multipart.upload.part.size default
    max_attempts: int = 5
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0


class S3RemoteStorageManager:
    """A RemoteStorageManager on S3. Blocking (boto3); thread-safe as boto3's client is."""

    def __init__(self, settings: S3Settings, *, check_bucket: bool = True) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:  # an optional dependency: pip install kafkalite[s3]
            raise RemoteStorageError(
                "the S3 remote storage needs boto3 (pip install 'kafkalite[s3]')"
            ) from exc
        if settings.part_size < _MIN_PART:
            raise RemoteStorageError(
                f"multipart part size {settings.part_size} is below S3's minimum of {_MIN_PART}"
            )
        self.settings = settings
        self.bucket = settings.bucket
        config = Config(
            region_name=settings.region,
            retries={"max_attempts": settings.max_attempts, "mode": "standard"},
            s3={"addressing_style": "path" if settings.path_style else "auto"},
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
        )
        self._client: Any = boto3.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=settings.secret_access_key,
            config=config,
        )
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
        if check_bucket:
            try:
                self._client.head_bucket(Bucket=self.bucket)
            except self._errors as exc:
                where = settings.endpoint_url or "AWS"
                raise RemoteStorageError(
                    f"S3 bucket {self.bucket!r} at {where} is not reachable: {exc}"
                ) from None

    # -- names ----------------------------------------------------------------------------------------
    def segment_key(self, m: RemoteLogSegmentMetadata, suffix: str) -> str:
        return f"{self.settings.prefix}{m.topic}-{m.partition}-{m.topic_id}/{m.object_name}{suffix}"

    def _not_found(self, exc: Exception) -> bool:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        return code in ("NoSuchKey", "404", "NotFound")

    # -- RemoteStorageManager -------------------------------------------------------------------------
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> None:
        files = {
            IndexType.OFFSET: data.offset_index,
            IndexType.TIMESTAMP: data.time_index,
            IndexType.TRANSACTION: data.transaction_index,
            IndexType.PRODUCER_SNAPSHOT: data.producer_snapshot,
            IndexType.LEADER_EPOCH: data.leader_epoch_index,
        }
        try:
            for kind, blob in files.items():
                if blob is not None:
                    self._client.put_object(
                        Bucket=self.bucket, Key=self.segment_key(metadata, kind.value), Body=blob
                    )
            self._upload_log(self.segment_key(metadata, ".log"), data)
        except self._errors as exc:
            raise RemoteStorageError(f"copy of {metadata.object_name} to S3: {exc}") from None

    def _upload_log(self, key: str, data: LogSegmentData) -> None:
        size = data.log_size
        part = self.settings.part_size
        with open(data.log_segment, "rb") as f:
            if size <= part:
                self._client.put_object(Bucket=self.bucket, Key=key, Body=f.read(size))
                return
            upload = self._client.create_multipart_upload(Bucket=self.bucket, Key=key)
            upload_id = upload["UploadId"]
            try:
                parts = []
                left, number = size, 1
                while left > 0:
                    chunk = f.read(min(part, left))
                    if not chunk:
                        raise RemoteStorageError(f"{data.log_segment} is shorter than {size}")
                    r = self._client.upload_part(
                        Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                        Body=chunk,
                    )  # fmt: skip
                    parts.append({"ETag": r["ETag"], "PartNumber": number})
                    left -= len(chunk)
                    number += 1
                self._client.complete_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                )  # fmt: skip
            except BaseException:
                try:
                    self._client.abort_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id
                    )
                except self._errors:
                    log.warning("abort of the multipart upload of %s failed", key)
                raise

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None
    ) -> bytes:
        key = self.segment_key(metadata, ".log")
        rng = f"bytes={start_position}-" + ("" if end_position is None else str(end_position))
        try:
            r = self._client.get_object(Bucket=self.bucket, Key=key, Range=rng)
            return bytes(r["Body"].read())
        except self._errors as exc:
            if self._not_found(exc):
                raise RemoteResourceNotFound(f"{key} not found in {self.bucket}") from None
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code == "InvalidRange":
                return b""
            raise RemoteStorageError(f"read of {key}: {exc}") from None

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        key = self.segment_key(metadata, index_type.value)
        try:
            r = self._client.get_object(Bucket=self.bucket, Key=key)
            return bytes(r["Body"].read())
        except self._errors as exc:
            if self._not_found(exc):
                raise RemoteResourceNotFound(f"{key} not found in {self.bucket}") from None
            raise RemoteStorageError(f"read of {key}: {exc}") from None

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        prefix = self.segment_key(metadata, "")
        try:
            uploads = self._client.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix)
            for u in uploads.get("Uploads", []):
                self._client.abort_multipart_upload(
                    Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"]
                )
            listed = self._client.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
            keys = [{"Key": o["Key"]} for o in listed.get("Contents", [])]
            if keys:
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})
        except self._errors as exc:
            raise RemoteStorageError(f"delete of {prefix}*: {exc}") from None

    def close(self) -> None:
        self._client.close()

    # -- for checks (orphans) -------------------------------------------------------------------------
    def list_objects(self) -> list[str]:
        """Every object key in the bucket under the prefix (one page of up to 1000 per call)."""
        out: list[str] = []
        token: dict[str, str] = {}
        while True:
            r = self._client.list_objects_v2(
                Bucket=self.bucket, Prefix=self.settings.prefix, **token
            )
            out += [str(o["Key"]) for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return out
            token = {"ContinuationToken": r["NextContinuationToken"]}

    def list_uploads(self) -> list[str]:
        """Keys with an unfinished multipart upload."""
        r = self._client.list_multipart_uploads(Bucket=self.bucket, Prefix=self.settings.prefix)
        return [str(u["Key"]) for u in r.get("Uploads", [])]
