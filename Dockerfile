# Multi-stage build: compile with the committed query data (no database needed), run slim.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked --bin parley

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/parley /usr/local/bin/parley
ENV PARLEY_BIND=0.0.0.0:8080 PARLEY_LOG_FORMAT=json PARLEY_DATA_DIR=/var/lib/parley
VOLUME /var/lib/parley
EXPOSE 8080
ENTRYPOINT ["parley"]
CMD ["serve"]
