# One image for every role; `darshak start --role …` picks what a container runs.
FROM node:20-bookworm-slim
WORKDIR /app
COPY . .
RUN npm ci && npm prune --omit=dev
ENV HOST=0.0.0.0 NATS_AUTOSTART=false DATA_DIR=/data
ENTRYPOINT ["node", "dist/src/main.js"]
CMD ["start"]
