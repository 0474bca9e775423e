# The production image of the service: one image, two roles (API and worker) chosen by the command.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
ENV NODE_ENV=production
EXPOSE 3000
CMD ["npm", "run", "start:api"]
