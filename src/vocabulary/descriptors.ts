/**
 * The words engine and connections share: how an input is described (activity inputs and connection
 * configuration fields alike), what an activity type is, and the name of the HTTP connection type. Below
 * both, so neither imports the other for them.
 */

export interface InputDescriptor {
  name: string;
  typeName: string;
  displayName: string;
  description: string;
  uiHint: string;
  isRequired: boolean;
  isSensitive: boolean;
  defaultValue: unknown;
  order: number;
  /** A connection input (`ConnectionProperties<T>`): resolved by name when the activity runs. */
  connectionType?: string;
  /** The recorded input value is masked as "****" in activity records. */
  noLog?: boolean;
}

export interface ActivityType {
  typeName: string;
  namespace: string;
  displayName: string;
  description: string;
  inputs: InputDescriptor[];
  outcomes: string[];
}

/** The connection type of Send HTTP Request's `connection` input. */
export const HTTP_CONNECTION_TYPE = 'Elsa.Connections.Http.HttpConnectionConfiguration';
